"""Running a pipeline on this machine, as a library call: what ``gangway run`` and
``gangway retry`` do, apart from parsing and rendering.

1. :func:`prepare_run` compiles the pipeline, fills the local defaults (``file://`` storage and
   a sqlite MLflow store under the state directory, provenance), lets the caller's check refuse
   values (``gangway run`` passes :func:`gangway.lint.values.values_check`: any value that
   would break or rewrite a manifest), refuses what this machine cannot run, and records the
   Workflow;
   :func:`resume_run` loads a recorded one with the nodes that already succeeded.
2. :func:`executor` builds the :class:`~gangway.local.LocalExecutor`, recording each node as
   it ends, so an interrupted run can be retried.
3. :func:`close_run` records the workflow's end in the lineage spool and sends what MLflow
   lacks; an outage leaves it spooled and is reported, never raised.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangway.argo.scope import parameter_values
from gangway.contract import LINEAGE_SPOOL, PIPELINE_LABEL
from gangway.errors import PermanentError
from gangway.lineage import sqlite_path, sqlite_uri
from gangway.lineage.records import Status, WorkflowInfo
from gangway.local._results import NodeResult, RunResult
from gangway.local.executor import LocalExecutor
from gangway.local.state import (
    SavedRun,
    find_run,
    load_nodes,
    run_dir,
    save_nodes,
    save_run,
)
from gangway.local.validation import check_shape, check_supported
from gangway.local.workflow import workflow_from_template
from gangway.step.tracking import WorkflowState, record_workflow

__all__ = [
    "LocalRun",
    "ValuesCheck",
    "close_run",
    "executor",
    "hold",
    "prepare_run",
    "reopen_run",
    "resume_run",
]


@dataclass
class LocalRun:
    """A workflow ready to run here: recorded in ``state_dir``, with what succeeded before."""

    saved: SavedRun
    state_dir: Path
    previous: dict[str, NodeResult] = field(default_factory=dict)
    """The nodes of the earlier attempt (``gangway retry``)."""
    retried: bool = False
    """Whether this is a retry of a recorded run."""

    @property
    def name(self) -> str:
        return self.saved.name

    @property
    def parameters(self) -> dict[str, str]:
        return parameter_values(self.saved.workflow.get("spec") or {})

    @property
    def pipeline_name(self) -> str:
        labels = self.saved.workflow["metadata"].get("labels") or {}
        return str(labels.get(PIPELINE_LABEL, "adhoc"))

    @property
    def spool(self) -> str:
        """Where the steps spool lineage (see :data:`gangway.contract.LINEAGE_SPOOL`)."""
        from gangway.argo.substitution import substitute

        scope = {
            "workflow.parameters.storage-root": self.parameters.get("storage-root", ""),
            "workflow.uid": self.saved.uid,
        }
        return substitute(LINEAGE_SPOOL, scope, where="the lineage spool")


def local_defaults(state_dir: Path, declared: set[str]) -> dict[str, str]:
    """``file://`` storage and a sqlite MLflow store under the state directory."""
    from gangway import storage

    root = state_dir.resolve()
    out = {}
    if "storage-root" in declared:
        try:
            out["storage-root"] = str(storage.parse(f"file://{root}/storage"))
        except PermanentError as e:
            raise PermanentError(f"--state-dir {state_dir}: {e}") from None
    if "mlflow-tracking-uri" in declared:
        out["mlflow-tracking-uri"] = sqlite_uri(root / "mlflow.db")
    return out


def absolute_locations(values: Mapping[str, str]) -> dict[str, str]:
    """``storage-root`` and ``mlflow-tracking-uri`` made absolute once, here: every step runs
    in a scratch directory of its own, where a relative path would name a different place.
    A malformed storage URI is refused, naming the parameter."""
    from gangway import storage

    out = dict(values)
    if "storage-root" in out:  # every step writes under it: a bad URI fails now, not later
        try:
            loc = storage.parse(out["storage-root"])
        except PermanentError as e:
            raise PermanentError(f"-p storage-root: {e}") from None
        if "://" not in out["storage-root"]:
            out["storage-root"] = str(loc)
    uri = out.get("mlflow-tracking-uri", "")
    path = sqlite_path(uri)
    if path is not None and not path.is_absolute():
        out["mlflow-tracking-uri"] = sqlite_uri(path.resolve())
    elif uri and ":" not in uri:  # a bare directory: MLflow's file store
        out["mlflow-tracking-uri"] = Path(uri).resolve().as_uri()
    return out


ValuesCheck = Callable[[Mapping[str, Any], Mapping[str, str], Mapping[str, str]], None]
"""Refuses parameter values before a run is recorded: ``(manifest, values, sources)``, where
``sources`` says how a value was set when not by the caller; raises to refuse."""


def prepare_run(
    pipeline: Path,
    values: Mapping[str, str],
    state_dir: Path,
    *,
    check: ValuesCheck | None = None,
    name: str | None = None,
) -> LocalRun:
    """Compile ``pipeline`` (a Hera file, or YAML manifests: ``name`` picks the object when
    it holds several) into the Workflow a cluster would run, its references to the file's
    WorkflowTemplates resolved, with ``values``; let ``check`` refuse them as they will be
    substituted; record it in ``state_dir``. Nothing runs yet."""
    from gangway.argo.references import declared_parameters
    from gangway.workflows.compiler import import_root, runnable_manifest
    from gangway.workflows.provenance import provenance_params

    manifest = runnable_manifest(pipeline, name)
    check_shape(manifest, str(pipeline))
    declared = declared_parameters(manifest)
    derived = {k: v for k, v in local_defaults(state_dir, declared).items() if k not in values}
    derived.update(provenance_params(pipeline, declared, values, cluster="local"))
    overrides = {**derived, **absolute_locations(values)}
    sources = {k: "--state-dir" for k in derived if k in ("storage-root", "mlflow-tracking-uri")}
    if check is not None:
        check(manifest, overrides, sources)
    workflow = workflow_from_template(manifest, overrides)
    check_supported(workflow)  # every construct this machine cannot run, before it is recorded
    check_locations(overrides, sources)
    # Steps import the pipeline's own module (Hera runner scripts do), as the image would.
    saved = SavedRun(workflow, str(pipeline), env={"PYTHONPATH": str(import_root(pipeline))})
    save_run(state_dir, saved)
    return LocalRun(saved, state_dir)


def check_locations(values: Mapping[str, str], sources: Mapping[str, str]) -> None:
    """Refuse, before anything runs, the places a run cannot use: a ``storage-root`` it cannot
    write (every step writes under it), an ``s3://`` value whose bucket does not exist, and a
    tracking store that could never take the run's lineage (not MLflow, another schema, a
    scheme MLflow does not keep runs at; a server that is down only delays it). A
    permanent mistake found here would otherwise surface after earlier steps ran, and a retry
    would replay the same value. Every problem at once, each naming its parameter."""
    from gangway import storage
    from gangway.errors import GangwayError, TransientError
    from gangway.lineage import store

    problems: list[tuple[str, GangwayError]] = []
    tracking = values.get("mlflow-tracking-uri", "")
    if tracking and not tracking.startswith(("http://", "https://")):  # a server may be down:
        try:  # the run spools and says so at the end; a store that cannot work is refused now
            store.check(tracking, write=True)
        except GangwayError as e:
            label = _label("mlflow-tracking-uri", sources)
            problems.append((f"{label}={tracking}: {e}", e))
    for name, value in values.items():
        write = name == "storage-root"
        if not value or (not write and not value.startswith("s3://")):
            continue
        try:
            storage.check_location(value, write=write)
        except GangwayError as e:
            label = _label(name, sources)
            problems.append((f"{label}={value}: {'cannot write there: ' if write else ''}{e}", e))
    if not problems:
        return
    lines = "\n".join(f"  {text}" for text, _ in problems)
    kind = TransientError if all(isinstance(e, TransientError) for _, e in problems) else None
    message = f"the run cannot use these places, nothing was run:\n{lines}"
    if kind is not None:
        raise TransientError(message + "\ntry again once they can be reached")
    raise PermanentError(message + "\nfix these values and run again")


def _label(name: str, sources: Mapping[str, str]) -> str:
    """How a parameter was set: ``-p NAME``, or ``--state-dir (parameter NAME)``."""
    return f"{sources[name]} (parameter {name})" if name in sources else f"-p {name}"


def resume_run(state_dir: Path, ref: str | None) -> LocalRun:
    """The recorded run ``ref`` (name or uid; the newest when None) with the nodes that
    succeeded in it; a run that succeeded has nothing to retry."""
    saved = find_run(state_dir, ref)
    phase, nodes = load_nodes(state_dir, saved.name)
    if phase == "Succeeded":
        raise PermanentError(
            f"workflow {saved.name} succeeded: nothing to retry (start a new run with "
            "`gangway run`)"
        )
    return LocalRun(saved, state_dir, nodes, retried=True)


@contextlib.contextmanager
def hold(run: LocalRun) -> Iterator[list[int]]:
    """Run ``run`` alone: an exclusive lock on its record (released by the kernel if this
    process dies), so a second ``gangway retry`` of the same workflow is refused while one is
    live. What an earlier attempt left running when its ``gangway`` was killed outright
    (SIGKILL) is killed first, so it cannot write beside the new attempt; yields those pids."""
    import fcntl

    from gangway.local._processes import kill_pids, processes_with

    path = run_dir(run.state_dir, run.name) / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            pid = lock.read().strip() or "?"
            raise PermanentError(
                f"workflow {run.name} is already running here (pid {pid}); wait for it, or stop "
                "it (Ctrl-C, or kill -TERM) and retry"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        leftovers = processes_with(run.saved.uid)
        kill_pids(leftovers)
        yield leftovers


def executor(
    run: LocalRun,
    *,
    parallelism: int | None = None,
    grace: float = 30.0,
    on_event: Callable[[NodeResult], None] | None = None,
    use_cache: bool = True,
    auto_resume: bool = False,
    secrets_dir: Path | None = None,
) -> LocalExecutor:
    """The executor for ``run``; every node that ends is recorded for ``gangway retry``."""
    paths = (run.saved.env.get("PYTHONPATH"), os.environ.get("PYTHONPATH"))
    ex = LocalExecutor(
        run.saved.workflow,
        run.state_dir,
        parallelism=parallelism,
        env={**run.saved.env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)},
        previous=run.previous,
        grace=grace,
        use_cache=use_cache,
        auto_resume=auto_resume,
        secrets_dir=secrets_dir,
    )
    save_nodes(run.state_dir, run.name, run.previous.values(), "Running")

    def event(node: NodeResult) -> None:
        if node.phase not in ("Running", "Pending"):  # what succeeded before stays recorded
            save_nodes(run.state_dir, run.name, [*run.previous.values(), *ex.nodes], "Running")
        if on_event is not None:
            on_event(node)

    ex.on_event = event
    return ex


def _workflow_info(run: LocalRun) -> WorkflowInfo:
    params = run.parameters
    return WorkflowInfo(
        pipeline=run.pipeline_name,
        name=run.name,
        uid=run.saved.uid,
        namespace="local",
        cluster=params.get("cluster", ""),
        git_sha=params.get("git-sha", ""),
        image=params.get("image", ""),
        parameters=params,
    )


def reopen_run(run: LocalRun) -> WorkflowState | None:
    """``gangway retry``: the workflow's MLflow parent run is running again."""
    tracking = run.parameters.get("mlflow-tracking-uri", "")
    if not tracking:
        return None
    return record_workflow(tracking, _workflow_info(run), "RUNNING", run.spool)


def close_run(run: LocalRun, result: RunResult) -> WorkflowState | None:
    """Record the run's end: the nodes for ``gangway retry``, and the workflow's state in the
    lineage spool and MLflow (FINISHED, FAILED, or KILLED when interrupted)."""
    save_nodes(run.state_dir, run.name, [*run.previous.values(), *result.nodes], result.phase)
    tracking = run.parameters.get("mlflow-tracking-uri", "")
    if not tracking:
        return None
    status: Status = "FINISHED" if result.phase == "Succeeded" else "FAILED"
    if result.interrupted is not None:
        status = "KILLED"
    info = _workflow_info(run)
    return record_workflow(tracking, info, status, run.spool, phase=result.phase)
