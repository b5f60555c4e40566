"""``gangway compile`` and ``gangway run``: a pipeline file to YAML, and run here."""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gangway.cli._output import console, err_console, output_file, wrapped, write_output
from gangway.cli._progress import progress, steps_table
from gangway.cli.options import ParamOpt, PipelineArg, StateDirOpt, parse_params
from gangway.contract import EXIT_TRANSIENT
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.local import LocalExecutor
    from gangway.local.session import Finished

__all__ = ["compile_cmd", "retry_cmd", "run_cmd"]


def compile_cmd(
    pipeline: PipelineArg,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="write the YAML to this file, not to stdout (missing directories are made)",
        ),
    ] = None,
) -> None:
    """Compile PIPELINE to the Argo manifest (YAML) that `gangway submit` would send.

    A YAML PIPELINE is checked as `gangway run` and `lint` check it, and printed normalised:
    one document each, keys sorted, comments dropped, template references left as written."""
    from gangway.workflows.compiler import load_documents, to_yaml

    if output is not None:
        output_file(output)  # a mistake here is not found after compiling
        if output.suffix == ".py" or (
            output.exists() and pipeline.exists() and output.samefile(pipeline)
        ):
            raise PermanentError(
                f"-o {output}: that is Python source (the pipeline itself?); writing YAML there "
                "would replace it — give a .yaml path"
            )
    text = to_yaml(load_documents(pipeline))
    if output is not None:
        write_output(output, text)
        console.print(f"wrote {output}", soft_wrap=True, highlight=False, markup=False)
    else:
        typer.echo(text, nl=False)


ParallelismOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="at most this many steps side by side (default: no limit, as Argo runs ready "
        "steps; the workflow's own parallelism still caps it)",
    ),
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
MetricsPortOpt = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        max=65535,
        help="serve the run's Prometheus metrics on http://127.0.0.1:PORT/metrics while it "
        "runs (0: any free port, printed at the start; docs/observability.md lists them)",
    ),
]


@contextlib.contextmanager
def _metrics_served(
    port: int | None, then: Callable[[LocalExecutor], None] | None = None
) -> Iterator[Callable[[LocalExecutor], None] | None]:
    """With ``port``: bind it now (a port in use is an error before anything runs), serve the
    run's metrics directory once the executor starts, stop when the run ends. Yields the
    executor-started hook (which also calls ``then``)."""
    if port is None:
        yield then
        return
    from gangway.step.metrics import serve

    try:
        bound, server, collector = serve(None, port)
    except OSError as e:
        raise PermanentError(
            f"--metrics-port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e}); "
            "give another port, or 0 for any free one"
        ) from None

    def started(ex: LocalExecutor) -> None:
        collector.directory = ex.metrics_dir
        console.print(f"metrics: http://127.0.0.1:{bound}/metrics", highlight=False, markup=False)
        if then is not None:
            then(ex)

    try:
        yield started
    finally:
        server.shutdown()
        server.server_close()


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
    parallelism: ParallelismOpt = None,
    grace: GraceOpt = 30.0,
    auto_resume: AutoResumeOpt = False,
    secrets_dir: SecretsDirOpt = None,
    metrics_port: MetricsPortOpt = None,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="run cacheable steps even when an earlier run on the same inputs and data "
            "left verified outputs (their cache entries are refreshed)",
        ),
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="a YAML PIPELINE holding several objects to run: run the one of this "
            "metadata.name (or generateName), Kind/NAME when two kinds share it",
        ),
    ] = None,
) -> None:
    """Compile PIPELINE and execute the compiled workflow on this machine.

    PIPELINE is a Hera .py file or YAML manifests. From YAML, the one Workflow,
    WorkflowTemplate or CronWorkflow that no other object of the file references runs (--name
    picks one when there are several); its templateRef and workflowTemplateRef to the file's
    WorkflowTemplates are resolved as Argo resolves them.

    Runs the very manifest Argo would receive, with Argo's semantics: DAG and steps templates
    (nested, fanned out), each container or script as a process of this machine, artifacts
    through a local artifact repository, exit handlers, suspend, daemons, volumes as
    directories of the run, the Volcano Job step as one torchrun per pod on 127.0.0.1,
    retries by the compiled retryStrategy. What cannot run here is refused first, all of it
    listed. Storage defaults to file:// under --state-dir. Every -p value is
    checked as it will be substituted before anything runs.

    A cacheable step (staging, evaluation) that ran before on the same inputs and the same
    data is not run again: its outputs are reused once verified, and it shows as `cached`.

    Every step writes Prometheus metrics (progress, tokens/s, checkpoints, device-seconds) to
    the run's directory; the live table shows a training step's step, tokens/s, ETA and last
    checkpoint, and --metrics-port serves them all for a Prometheus to scrape.

    Ctrl-C (or SIGTERM) stops it cleanly: every step and pod gets SIGTERM (training saves a
    checkpoint), whatever is left after --grace-period is killed, the MLflow runs are closed,
    and `gangway retry` resumes it.
    """
    from gangway.lint import CrdSchemas
    from gangway.lint.values import values_check
    from gangway.local.session import run_pipeline

    values = parse_params(param)
    check = values_check(CrdSchemas.from_env())
    with _metrics_served(metrics_port) as started, progress(started) as live:
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
            name=name,
        )
    _report(finished)


def retry_cmd(
    workflow: Annotated[
        str | None,
        typer.Argument(help="the workflow's name or uid (default: the newest in --state-dir)"),
    ] = None,
    state_dir: StateDirOpt = Path(".gangway"),
    parallelism: ParallelismOpt = None,
    grace: GraceOpt = 30.0,
    auto_resume: AutoResumeOpt = False,
    secrets_dir: SecretsDirOpt = None,
    metrics_port: MetricsPortOpt = None,
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

    with _metrics_served(metrics_port, started) as hook, progress(hook) as live:
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


def _report(finished: Finished) -> None:
    """The summary table, where everything is, what to run next; exit with the run's code."""
    result = finished.result
    title = f"{result.name}: {_phase(finished)} in {result.seconds:.0f}s"
    console.print(steps_table(result.nodes, title, workflow=result.name))
    for label, text in finished.locations():  # one line each: commands stay whole to copy
        line = f"{label + ':' if label else '':<9}{text}"
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    pairs = " ".join(f"{k}={shlex.quote(v)}" for k, v in result.parameters.items())
    params = wrapped(pairs, console.width, first="params:  ", rest=" " * 9)  # -p name=value
    console.print(params, soft_wrap=True, highlight=False, markup=False)
    if finished.unsent is not None:
        state = finished.lineage
        assert state is not None
        err_console.print(
            f"error: lineage not recorded — {max(state.pending, 1)} record(s) are not in MLflow "
            f"({state.error or 'pending'}). They stay spooled; once the store works, send "
            f"them with:\n  {finished.unsent}",
            style="red",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    if result.survivors:
        err_console.print(f"[yellow]killed {len(result.survivors)} leftover process(es)[/]")
    if result.phase == "Succeeded":
        if finished.unsent is not None:  # the work is done; its record is not (yet)
            raise typer.Exit(EXIT_TRANSIENT)
        return
    bad = next((n for n in result.nodes if n.phase in ("Failed", "Error")), None)
    if result.error:
        _red(f"error: {result.error}")
    elif bad is not None:
        _red(
            f"{bad.name} {bad.phase.lower()}: {bad.message}"
            + (f"  log: {bad.log}" if bad.log else "")
        )
    permanent = finished.permanent_failure
    if permanent is not None:
        console.print(
            f"{permanent.name} failed for good (exit {permanent.exit_code}): run again as it "
            "is, it fails the same way. Change what the message names — a -p value: start a "
            "new run with it changed (`gangway run … -p NAME=VALUE`); the data or code it "
            f"reads: fix that, then `{finished.retry_command}`",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    elif result.error and not result.error_retryable and result.interrupted is None:
        console.print(
            "the workflow itself must change: fix what the error names, then run it again "
            "(a retry would meet the same error)",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    else:
        console.print(f"resume with: {finished.retry_command}", highlight=False, markup=False)
    raise typer.Exit(128 + result.interrupted if result.interrupted else 1)


def _red(text: str) -> None:
    """A failure, as written: no markup read into it (messages hold brackets)."""
    console.print(text, style="red", soft_wrap=True, highlight=False, markup=False)


def _phase(finished: Finished) -> str:
    if finished.result.interrupted is not None:
        return f"Interrupted ({signal.Signals(finished.result.interrupted).name})"
    return finished.result.phase
