"""``gangway compile`` and ``gangway run``: a pipeline file to YAML, and run here."""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.table import Table

from gangway.cli._output import console, err_console
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.local import NodeResult, RunResult
    from gangway.local.runs import LocalRun
    from gangway.tracking import WorkflowState

__all__ = ["compile_cmd", "retry_cmd", "run_cmd"]

PipelineArg = Annotated[Path, typer.Argument(help="a pipeline file, e.g. pipelines/x.py")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("-p", "--param", help="override a workflow parameter: -p name=value"),
]


def compile_cmd(
    pipeline: PipelineArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="write here")] = None,
) -> None:
    """Compile PIPELINE to the Argo manifest (YAML) that `gangway submit` would send."""
    from gangway.compiler import compile_pipeline, to_yaml

    text = to_yaml(compile_pipeline(pipeline))
    if output:
        output.write_text(text)
        console.print(f"wrote {output}")
    else:
        typer.echo(text, nl=False)


def _params(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise PermanentError(f"-p {item!r}: expected name=value, e.g. -p train-steps=100")
        out[k] = v  # the last of a name wins, as with `argo submit -p`
    return out


_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Error": "red",
    "Running": "yellow",
    "Skipped": "dim",
    "Omitted": "dim",
}


def _table(nodes: Sequence[object], title: str) -> Table:
    from gangway.local import NodeResult

    table = Table(title=title, header_style="bold")
    for col in ("step", "status", "attempts", "seconds", "outputs / message"):
        table.add_column(col, overflow="fold")
    for n in nodes:
        assert isinstance(n, NodeResult)
        style = _STYLE.get(n.phase, "")
        detail = ", ".join(f"{k}={_short(v)}" for k, v in n.outputs.items()) or n.message
        table.add_row(
            n.name,
            f"[{style}]{n.phase}[/]",
            str(n.attempts or ""),
            f"{n.seconds:.1f}" if n.seconds else "",
            detail,
        )
    return table


def _short(v: str, n: int = 60) -> str:
    v = v.strip()
    return v if len(v) <= n else v[: n - 1] + "…"


StateDirOpt = Annotated[
    Path, typer.Option(help="local state: storage, logs, the MLflow store, runs to retry")
]
ParallelismOpt = Annotated[
    int, typer.Option(min=1, help="fanned-out steps run side by side, at most this many")
]
GraceOpt = Annotated[
    float,
    typer.Option(
        "--grace-period",
        min=0,
        max=3600,
        help="on Ctrl-C/SIGTERM: seconds a step has to save and exit before it is killed",
    ),
]


def run_cmd(
    pipeline: PipelineArg,
    param: ParamOpt = None,
    state_dir: StateDirOpt = Path(".gangway"),
    parallelism: ParallelismOpt = 1,
    grace: GraceOpt = 30.0,
) -> None:
    """Compile PIPELINE and execute the compiled workflow on this machine.

    Runs the DAG of the very manifest Argo would receive: each step's container command in a
    subprocess, the Volcano Job step as one torchrun per pod on 127.0.0.1, retries by the
    compiled retryStrategy. Storage defaults to file:// under --state-dir. Every -p value is
    checked as it will be substituted before anything runs.

    Ctrl-C (or SIGTERM) stops it cleanly: every step and pod gets SIGTERM (training saves a
    checkpoint), whatever is left after --grace-period is killed, the MLflow runs are closed,
    and `gangway retry` resumes it.
    """
    from gangway.local.runs import prepare_run

    run = prepare_run(pipeline, _params(param), state_dir)
    _execute(run, parallelism, grace)


def retry_cmd(
    workflow: Annotated[
        str | None,
        typer.Argument(help="the workflow's name or uid (default: the newest in --state-dir)"),
    ] = None,
    state_dir: StateDirOpt = Path(".gangway"),
    parallelism: ParallelismOpt = 1,
    grace: GraceOpt = 30.0,
) -> None:
    """Resume a failed or interrupted local run, as `argo retry` does: same workflow, same uid.

    Steps that succeeded are not run again (their recorded outputs are used); failed and
    interrupted steps run again, and training resumes from its newest checkpoint.
    """
    from gangway.local.runs import resume_run

    run = resume_run(state_dir, workflow)
    _execute(run, parallelism, grace, retry=True)


def _execute(run: LocalRun, parallelism: int, grace: float, *, retry: bool = False) -> None:
    """Run alone (a second run of the same workflow is refused), with a live table; a stop
    signal stops the run (a second one kills at once); then record its end and report."""
    from gangway.local.runs import close_run, hold, reopen_run

    with hold(run) as leftovers:
        if leftovers:
            err_console.print(
                f"[yellow]killed {len(leftovers)} process(es) an earlier attempt of {run.name} "
                "left running (its gangway was killed outright)[/]"
            )
        if retry:
            kept = sum(n.phase == "Succeeded" for n in run.previous.values())
            console.print(
                f"retrying {run.name} (uid {run.saved.uid}): {kept} step(s) succeeded before "
                "and are kept",
                highlight=False,
            )
            state = reopen_run(run)
            if state is not None and state.error:
                err_console.print(
                    f"[yellow]warning: MLflow not told of the retry yet: {state.error}[/]"
                )
        result = _live_run(run, parallelism, grace)
        with _forward_signals(_Closing()):
            state = close_run(run, result)
            _report(run, result, state)


def _live_run(run: LocalRun, parallelism: int, grace: float) -> RunResult:
    """Execute ``run`` with the live table; the stop signals go to the executor."""
    from gangway.local.runs import executor

    done: list[NodeResult] = []
    running: dict[str, NodeResult] = {}
    lock = threading.Lock()  # events come from step threads, the view from rich's refresher
    t0 = time.monotonic()
    ex = executor(run, parallelism=parallelism, grace=grace)

    def view() -> Table:
        title = f"{run.name}  ({time.monotonic() - t0:.0f}s)"
        if ex.procs.stopping is not None:
            title += f"  stopping ({signal.Signals(ex.procs.stopping).name}): Ctrl-C again kills"
        with lock:
            nodes = [*done, *running.values()]
        return _table(nodes, title)

    def event(node: NodeResult) -> None:
        with lock:
            if node.phase in ("Running", "Pending"):
                running[node.name] = node
            else:
                running.pop(node.name, None)
                done.append(node)

    ex.on_event = _chain(ex.on_event, event)
    with (
        Live(get_renderable=view, console=console, refresh_per_second=4, transient=True),
        _forward_signals(ex.interrupt),
    ):
        return ex.run()


def _chain(*fns: Callable[[NodeResult], None]) -> Callable[[NodeResult], None]:
    def both(node: NodeResult) -> None:
        for fn in fns:
            fn(node)

    return both


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a kill, a closed terminal or a dropped ssh session: each stops the run cleanly."""


@contextlib.contextmanager
def _forward_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """The stop signals stop the run instead of killing this process."""
    previous = {sig: signal.signal(sig, lambda n, frame: handler(n)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Closing:
    """While the run's end is recorded: a first stop signal waits for it (a few seconds at
    most), a second one quits at once."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, sig: int) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = sig
        err_console.print("[yellow]recording the run's end; a second signal quits at once[/]")


def _report(run: LocalRun, result: RunResult, state: WorkflowState | None) -> None:
    """The summary table, where everything is, what to run next; exit with the run's code."""
    q = shlex.quote
    console.print(_table(result.nodes, f"{result.name}: {_phase(result)} in {result.seconds:.0f}s"))
    storage_root = result.parameters.get("storage-root", "")
    where = [f"run:     {storage_root}/runs/{result.uid}", f"logs:    {result.state_dir}/logs"]
    tracking = result.parameters.get("mlflow-tracking-uri", "")
    if state is not None:
        exp = f"experiment {run.pipeline_name!r}"
        where.append(f"mlflow:  {exp}, workflow run {state.parent or '(not yet recorded)'}")
        if state.url and state.url.startswith(("http://", "https://")):
            where.append(f"         {state.url}")
        if tracking.startswith("sqlite:"):
            where.append(f"         mlflow ui --backend-store-uri {q(tracking)}")
        where.append(
            f"lineage: gangway lineage {q('workflow:' + result.name)} --tracking-uri {q(tracking)}"
        )
    where.append(f"params:  {json.dumps(result.parameters)}")
    for line in where:
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    if state is not None and (state.error or state.pending):
        sync = f"gangway lineage sync --spool {q(run.spool)} --tracking-uri {q(tracking)}"
        err_console.print(
            f"[yellow]warning: {max(state.pending, 1)} lineage record(s) not in MLflow yet "
            f"({state.error or 'pending'}); they are spooled — send them with: {sync}[/]",
            soft_wrap=True,
            highlight=False,
        )
    if result.survivors:
        err_console.print(f"[yellow]killed {len(result.survivors)} leftover process(es)[/]")
    if result.phase == "Succeeded":
        return
    bad = next((n for n in result.nodes if n.phase in ("Failed", "Error")), None)
    if result.error:
        console.print(f"[red]error: {result.error}[/]", soft_wrap=True, highlight=False)
    elif bad is not None:
        console.print(
            f"[red]{bad.name} {bad.phase.lower()}: {bad.message}[/]  log: {bad.log}",
            soft_wrap=True,
            highlight=False,
        )
    state_dir = q(str(run.state_dir.resolve()))
    console.print(
        f"resume with: gangway retry {q(result.name)} --state-dir {state_dir}", highlight=False
    )
    raise typer.Exit(128 + result.interrupted if result.interrupted else 1)


def _phase(result: RunResult) -> str:
    if result.interrupted is not None:
        return f"Interrupted ({signal.Signals(result.interrupted).name})"
    return result.phase
