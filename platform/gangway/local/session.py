"""Running a pipeline on this machine as one library call — :func:`run_pipeline` and
:func:`retry_pipeline` — apart from how progress is shown (``gangway run`` draws a live table;
a notebook may print, or show nothing).

:func:`execute` is what both do once the run is recorded (:mod:`gangway.local.runs`): hold
the run alone, reopen its MLflow parent run when retrying, execute it with the stop signals
(Ctrl-C, SIGTERM, SIGHUP) stopping it cleanly — sending the steps' spooled lineage to MLflow in
the background as each step ends (:class:`~gangway.lineage.follow.Replayer`) — then record its
end, even when a signal comes while that is written.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangway.contract import ENV_STEP, EXIT_PERMANENT
from gangway.lineage.follow import Replayer
from gangway.local._results import NodeResult, RunResult
from gangway.local._suspend import SUSPENDED
from gangway.local.executor import LocalExecutor
from gangway.local.runs import (
    LocalRun,
    ValuesCheck,
    close_run,
    executor,
    hold,
    prepare_run,
    reopen_run,
    resume_run,
)
from gangway.local.validation import retry_notices
from gangway.step.tracking import WorkflowState

__all__ = [
    "STOP_SIGNALS",
    "Finished",
    "Watch",
    "execute",
    "retry_pipeline",
    "run_pipeline",
    "stop_signals",
]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a kill, a closed terminal or a dropped ssh session: each stops the run cleanly."""


@dataclass
class Watch:
    """What a caller is told while a run goes on (every hook optional)."""

    on_event: Callable[[NodeResult], None] | None = None
    """A node started, has news, or ended."""
    on_start: Callable[[LocalExecutor], None] | None = None
    """The executor is about to run (its ``procs.stopping`` says when a stop is under way)."""
    notify: Callable[[str], None] = lambda message: None
    """Something worth a warning: leftovers killed, MLflow not told of the retry, a stop
    signal while the run's end is recorded."""


@dataclass
class Finished:
    """A run that ended: its result, where the lineage stands, what was cleaned up first."""

    run: LocalRun
    result: RunResult
    lineage: WorkflowState | None
    """The workflow's MLflow parent run (None when tracking is off)."""
    leftovers: list[int] = field(default_factory=list)
    """Processes an earlier attempt left running, killed before this one started."""

    @property
    def tracking_uri(self) -> str:
        return self.result.parameters.get("mlflow-tracking-uri", "")

    def locations(self) -> list[tuple[str, str]]:
        """Where everything is: ``(label, text)`` lines — the run's storage, its logs, its
        MLflow runs and the command that shows its lineage."""
        q, r = shlex.quote, self.result
        where = [("logs", f"{r.state_dir}/logs")]
        if r.parameters.get("storage-root"):
            where.insert(0, ("run", f"{r.parameters['storage-root']}/runs/{r.uid}"))
        state, tracking = self.lineage, self.tracking_uri
        if state is not None:
            parent = state.parent or "(not yet recorded)"
            where.append(
                ("mlflow", f"experiment {self.run.pipeline_name!r}, workflow run {parent}")
            )
            if state.url and state.url.startswith(("http://", "https://")):
                where.append(("", state.url))
            if tracking.startswith("sqlite:"):
                where.append(("", f"mlflow ui --backend-store-uri {q(tracking)}"))
            lineage = f"gangway lineage {q('workflow:' + r.name)} --tracking-uri {q(tracking)}"
            where.append(("lineage", lineage))
        return where

    @property
    def unsent(self) -> str | None:
        """When lineage records are not in MLflow yet: the command that sends them (to the
        store the spool records, the run's own)."""
        state = self.lineage
        if state is None or not (state.error or state.pending):
            return None
        return f"gangway lineage sync --spool {shlex.quote(self.run.spool)}"

    @property
    def permanent_failure(self) -> NodeResult | None:
        """The step that failed for good — a Gangway step (it keeps the exit-code contract)
        that exited 1, the permanent error: a retry with the same values cannot help — when
        that is why the run failed (not a signal, not a transient or unknown failure; any
        other program's exit 1 may mean anything)."""
        r = self.result
        if r.interrupted is not None or r.error:
            return None
        failed = [n for n in r.nodes if n.phase in ("Failed", "Error")]
        steps = _contract_steps(self.run.saved.workflow)
        if failed and all(n.exit_code == EXIT_PERMANENT and n.template in steps for n in failed):
            return failed[0]
        return None

    @property
    def retry_command(self) -> str:
        q = shlex.quote
        state_dir = q(str(self.run.state_dir.resolve()))
        return f"gangway retry {q(self.result.name)} --state-dir {state_dir}"


def _contract_steps(workflow: Mapping[str, Any]) -> set[str]:
    """The templates that run a Gangway step (:data:`gangway.contract.ENV_STEP` in their
    environment), whose exit codes follow the contract."""
    out = set()
    for t in (workflow.get("spec") or {}).get("templates") or []:
        body = t.get("container") or t.get("script") or {}
        if any(e.get("name") == ENV_STEP for e in body.get("env") or []):
            out.add(str(t.get("name")))
    return out


def run_pipeline(
    pipeline: Path,
    values: Mapping[str, str] | None = None,
    state_dir: Path = Path(".gangway"),
    *,
    parallelism: int | None = None,
    grace: float = 30.0,
    watch: Watch | None = None,
    check: ValuesCheck | None = None,
    use_cache: bool = True,
    auto_resume: bool = False,
    secrets_dir: Path | None = None,
    name: str | None = None,
) -> Finished:
    """Compile ``pipeline`` and run the Workflow a cluster would run, here: ``values``
    override its parameters; storage and MLflow default to ``state_dir``.

    ``check`` may refuse the values first, as they will be substituted (``gangway run`` gives
    :func:`gangway.lint.values.values_check`). Without it, a value that would rewrite a
    resource manifest is still refused when that step is about to run. ``use_cache=False``
    runs cacheable steps even when a verified entry exists (:mod:`gangway.step.caching`). ``name``
    picks the object of a YAML file that holds several (:func:`gangway.local.runs.prepare_run`)."""
    run = prepare_run(pipeline, values or {}, state_dir, check=check, name=name)
    return execute(
        run,
        parallelism=parallelism,
        grace=grace,
        watch=watch,
        use_cache=use_cache,
        auto_resume=auto_resume,
        secrets_dir=secrets_dir,
    )


def retry_pipeline(
    state_dir: Path,
    workflow: str | None = None,
    *,
    parallelism: int | None = None,
    grace: float = 30.0,
    watch: Watch | None = None,
    auto_resume: bool = False,
    secrets_dir: Path | None = None,
) -> Finished:
    """Resume a failed or interrupted run (``workflow``: name or uid; the newest when None):
    what succeeded is kept, the rest runs again."""
    run = resume_run(state_dir, workflow)
    return execute(
        run,
        parallelism=parallelism,
        grace=grace,
        watch=watch,
        auto_resume=auto_resume,
        secrets_dir=secrets_dir,
    )


def execute(
    run: LocalRun,
    *,
    parallelism: int | None = None,
    grace: float = 30.0,
    watch: Watch | None = None,
    use_cache: bool = True,
    auto_resume: bool = False,
    secrets_dir: Path | None = None,
) -> Finished:
    """Run a recorded run alone to its end and record that end (see the module docstring)."""
    watch = watch or Watch()
    with hold(run) as leftovers:
        if leftovers:
            watch.notify(
                f"killed {len(leftovers)} process(es) an earlier attempt of {run.name} left "
                "running (its gangway was killed outright)"
            )
        for notice in retry_notices(run.saved.workflow):
            watch.notify(notice)
        tracking = run.parameters.get("mlflow-tracking-uri", "")
        replayer = Replayer(run.spool, tracking) if tracking else None

        def on_event(node: NodeResult) -> None:
            if replayer is not None and node.phase not in ("Running", "Pending"):
                replayer.poke()  # steps only spool: their lineage goes to MLflow from here
            if node.phase == "Running" and node.message.startswith(SUSPENDED):
                where = shlex.quote(str(run.state_dir))
                watch.notify(
                    f"{node.name} is suspended: go on with `gangway resume {run.name} "
                    f"--state-dir {where}` (or run with --auto-resume)"
                )
            if watch.on_event is not None:
                watch.on_event(node)

        ex = executor(
            run,
            parallelism=parallelism,
            grace=grace,
            on_event=on_event,
            use_cache=use_cache,
            auto_resume=auto_resume,
            secrets_dir=secrets_dir,
        )
        if watch.on_start is not None:
            watch.on_start(ex)
        if run.retried:
            reopened = reopen_run(run)
            if reopened is not None and reopened.error:
                watch.notify(f"MLflow not told of the retry yet: {reopened.error}")
        try:
            with stop_signals(ex.interrupt):
                result = ex.run()
        finally:
            if replayer is not None:
                replayer.close()
        with stop_signals(_Closing(watch.notify)):
            lineage = close_run(run, result)
    return Finished(run, result, lineage, leftovers)


@contextlib.contextmanager
def stop_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """The stop signals call ``handler`` instead of killing this process (in the main thread;
    elsewhere signals cannot be caught, and they keep their effect)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda n, frame: handler(n)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Closing:
    """While the run's end is recorded: a first stop signal waits for it (a few seconds at
    most), a second one quits at once."""

    def __init__(self, notify: Callable[[str], None]) -> None:
        self.notify = notify
        self.signal: int | None = None

    def __call__(self, sig: int) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = sig
        self.notify("recording the run's end; a second signal quits at once")
