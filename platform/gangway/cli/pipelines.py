"""``gangway compile`` and ``gangway run``: a pipeline file to YAML, and run here."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.table import Table

from gangway.cli._output import console, err_console
from gangway.cli.options import ParamOpt, PipelineArg, StateDirOpt, parse_params

if TYPE_CHECKING:
    from gangway.local import LocalExecutor, NodeResult
    from gangway.local.session import Finished, Watch

__all__ = ["compile_cmd", "retry_cmd", "run_cmd"]


def compile_cmd(
    pipeline: PipelineArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="write here")] = None,
) -> None:
    """Compile PIPELINE to the Argo manifest (YAML) that `gangway submit` would send."""
    from gangway.compiler import compile_documents, to_yaml

    text = to_yaml(compile_documents(pipeline))
    if output:
        output.write_text(text)
        console.print(f"wrote {output}")
    else:
        typer.echo(text, nl=False)


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
        detail = _detail(n)
        table.add_row(
            n.name,
            "[cyan]cached[/]" if n.cached else f"[{style}]{n.phase}[/]",
            str(n.attempts or ""),
            f"{n.seconds:.1f}" if n.seconds else "",
            detail,
        )
    return table


def _detail(n: NodeResult) -> str:
    """A node's outputs (those not empty), or its message; a cache check's verdict."""
    from gangway.memoize import CHECK_SUFFIX

    if n.outputs.get("verdict") and n.template.endswith(CHECK_SUFFIX):
        return f"cache check: {n.outputs['verdict']}"
    shown = ", ".join(f"{k}={_short(v)}" for k, v in n.outputs.items() if v.strip())
    if not shown and n.result and n.result.strip() and n.phase == "Succeeded":
        shown = f"result={_short(n.result)}"
    return shown or n.message


def _short(v: str, n: int = 60) -> str:
    v = v.strip()
    return v if len(v) <= n else v[: n - 1] + "…"


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


AutoResumeOpt = Annotated[
    bool,
    typer.Option(
        "--auto-resume",
        help="a suspend step without a duration goes on at once (else it waits for "
        "`gangway resume`)",
    ),
]
SecretsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--secrets-dir",
        help="where env secretKeyRef values are: DIR/SECRET/KEY files (else the variable "
        "GANGWAY_SECRET_<SECRET>_<KEY>)",
    ),
]


def run_cmd(
    pipeline: PipelineArg,
    param: ParamOpt = None,
    state_dir: StateDirOpt = Path(".gangway"),
    parallelism: ParallelismOpt = 1,
    grace: GraceOpt = 30.0,
    auto_resume: AutoResumeOpt = False,
    secrets_dir: SecretsDirOpt = None,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="run cacheable steps even when an earlier run on the same inputs and data "
            "left verified outputs (their cache entries are refreshed)",
        ),
    ] = False,
) -> None:
    """Compile PIPELINE and execute the compiled workflow on this machine.

    Runs the very manifest Argo would receive, with Argo's semantics: DAG and steps templates
    (nested, fanned out), each container or script as a process of this machine, artifacts
    through a local artifact repository, exit handlers, suspend, daemons, volumes as
    directories of the run, the Volcano Job step as one torchrun per pod on 127.0.0.1,
    retries by the compiled retryStrategy. What cannot run here is refused first, all of it
    listed. Storage defaults to file:// under --state-dir. Every -p value is
    checked as it will be substituted before anything runs.

    A cacheable step (staging, evaluation) that ran before on the same inputs and the same
    data is not run again: its outputs are reused once verified, and it shows as `cached`.

    Ctrl-C (or SIGTERM) stops it cleanly: every step and pod gets SIGTERM (training saves a
    checkpoint), whatever is left after --grace-period is killed, the MLflow runs are closed,
    and `gangway retry` resumes it.
    """
    from gangway.lint import CrdSchemas
    from gangway.lint.values import values_check
    from gangway.local.session import run_pipeline

    values = parse_params(param)
    check = values_check(CrdSchemas.from_env())
    with _LiveTable() as live:
        finished = run_pipeline(
            pipeline,
            values,
            state_dir,
            parallelism=parallelism,
            grace=grace,
            watch=live.watch(),
            check=check,
            use_cache=not no_cache,
            auto_resume=auto_resume,
            secrets_dir=secrets_dir,
        )
    _report(finished)


def retry_cmd(
    workflow: Annotated[
        str | None,
        typer.Argument(help="the workflow's name or uid (default: the newest in --state-dir)"),
    ] = None,
    state_dir: StateDirOpt = Path(".gangway"),
    parallelism: ParallelismOpt = 1,
    grace: GraceOpt = 30.0,
    auto_resume: AutoResumeOpt = False,
    secrets_dir: SecretsDirOpt = None,
) -> None:
    """Resume a failed or interrupted local run, as `argo retry` does: same workflow, same uid.

    Steps that succeeded are not run again (their recorded outputs are used); failed and
    interrupted steps run again, and training resumes from its newest checkpoint.
    """
    from gangway.local.session import retry_pipeline

    def started(ex: LocalExecutor) -> None:
        console.print(
            f"retrying {ex.name} (uid {ex.uid}): {len(ex.previous)} step(s) succeeded before "
            "and are kept",
            highlight=False,
        )

    with _LiveTable(started) as live:
        finished = retry_pipeline(
            state_dir,
            workflow,
            parallelism=parallelism,
            grace=grace,
            watch=live.watch(),
            auto_resume=auto_resume,
            secrets_dir=secrets_dir,
        )
    _report(finished)


class _LiveTable:
    """The steps of the run as a live table (events come from step threads, the view from
    rich's refresher); warnings are printed above it."""

    def __init__(self, started: Callable[[LocalExecutor], None] | None = None) -> None:
        self.started = started
        self.ex: LocalExecutor | None = None
        self.done: list[NodeResult] = []
        self.running: dict[str, NodeResult] = {}
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.live = Live(
            get_renderable=self.view, console=console, refresh_per_second=4, transient=True
        )

    def __enter__(self) -> _LiveTable:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def watch(self) -> Watch:
        from gangway.local.session import Watch

        return Watch(on_event=self.event, on_start=self.start, notify=self.warn)

    def start(self, ex: LocalExecutor) -> None:
        self.ex, self.t0 = ex, time.monotonic()
        if self.started is not None:
            self.started(ex)

    def event(self, node: NodeResult) -> None:
        with self.lock:
            if node.phase in ("Running", "Pending"):
                self.running[node.name] = node
            else:
                self.running.pop(node.name, None)
                self.done.append(node)

    @staticmethod
    def warn(message: str) -> None:
        err_console.print(f"[yellow]{message}[/]", soft_wrap=True, highlight=False)

    def view(self) -> Table:
        if self.ex is None:
            return Table(title="preparing the run…")
        title = f"{self.ex.name}  ({time.monotonic() - self.t0:.0f}s)"
        if self.ex.procs.stopping is not None:
            stop = signal.Signals(self.ex.procs.stopping).name
            title += f"  stopping ({stop}): Ctrl-C again kills"
        with self.lock:
            nodes = [*self.done, *self.running.values()]
        return _table(nodes, title)


def _report(finished: Finished) -> None:
    """The summary table, where everything is, what to run next; exit with the run's code."""
    result = finished.result
    console.print(
        _table(result.nodes, f"{result.name}: {_phase(finished)} in {result.seconds:.0f}s")
    )
    for label, text in [*finished.locations(), ("params", json.dumps(result.parameters))]:
        line = f"{label + ':' if label else '':<9}{text}"
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    if finished.unsent is not None:
        state = finished.lineage
        assert state is not None
        err_console.print(
            f"[yellow]warning: {max(state.pending, 1)} lineage record(s) not in MLflow yet "
            f"({state.error or 'pending'}); they are spooled — send them with: "
            f"{finished.unsent}[/]",
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
            f"[red]{bad.name} {bad.phase.lower()}: {bad.message}[/]"
            + (f"  log: {bad.log}" if bad.log else ""),
            soft_wrap=True,
            highlight=False,
        )
    console.print(f"resume with: {finished.retry_command}", highlight=False)
    raise typer.Exit(128 + result.interrupted if result.interrupted else 1)


def _phase(finished: Finished) -> str:
    if finished.result.interrupted is not None:
        return f"Interrupted ({signal.Signals(finished.result.interrupted).name})"
    return finished.result.phase
