"""A step's lineage, recorded as it works and written to MLflow when it ends.

A step opens a :class:`StepTracker` and records params, metrics, its dataset, the checkpoints
it writes or reads, a model to register and its outputs. The record goes to the spool
(shared storage, ``GANGWAY_LINEAGE_SPOOL``; training spools again at every checkpoint, so even
a SIGKILLed attempt leaves its checkpoints behind).

In a pipeline (``GANGWAY_LINEAGE_REPLAY=later``) that is all a step does: importing the MLflow
client and replaying cost seconds, more than a short step's own work, so the replay happens
elsewhere — in ``gangway run`` as steps end, and on a cluster in the workflow's exit handler and
the namespace's ``gangway lineage sync --follow``. The step's ``mlflow_run_url`` output is a
search link by its record key (:func:`gangway.lineage.links.record_link`), valid before the run
exists.

Run by hand (the variable unset), a step replays the spool itself before it exits, importing
MLflow on a background thread as soon as the tracker opens. If MLflow cannot be reached the
step still succeeds and says so on stderr: lineage must never fail the work it describes.

Environment read: the step environment of :mod:`gangway.contract` — ``MLFLOW_TRACKING_URI``
(tracking is off without it), the workflow's identity and parameters, ``GANGWAY_STEP``,
``GANGWAY_LINEAGE_SPOOL`` and ``GANGWAY_OUTPUTS`` (where the step writes its ``mlflow_run_url``
output parameter).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gangway.contract import (
    ENV_LINEAGE_REPLAY,
    ENV_LINEAGE_SPOOL,
    ENV_OUTPUTS,
    ENV_STEP,
    ENV_TRACKING_URI,
    EXIT_PREEMPTED,
    param_value,
    tag,
)
from gangway.lineage import SyncReport, default_spool, sync
from gangway.lineage.attempts import RUNNING_MS, attempt_tags, held
from gangway.lineage.ensure import run_url
from gangway.lineage.records import (
    CheckpointRef,
    DatasetRef,
    MetricPoint,
    Registration,
    Status,
    StepRecord,
    WorkflowInfo,
    now_ms,
    workflow_from_env,
)
from gangway.lineage.spool import Spool
from gangway.step.metrics import StepMetrics

__all__ = ["CheckpointRef", "StepTracker", "WorkflowState", "record_workflow", "run_url"]


class StepTracker:
    """Collects one step attempt's lineage; spools it and writes it to MLflow when it ends."""

    def __init__(
        self, step: str | None = None, env: Mapping[str, str] | None = None, node: str = ""
    ) -> None:
        env = os.environ if env is None else env
        self.uri = env.get(ENV_TRACKING_URI, "")
        self.enabled = bool(self.uri)
        wf = workflow_from_env(env)
        self.record = StepRecord(workflow=wf, step=step or env.get(ENV_STEP, "step"), node=node)
        self.spool = Spool(env.get(ENV_LINEAGE_SPOOL) or default_spool(wf.uid), self.uri)
        self.outputs_dir = env.get(ENV_OUTPUTS, "")
        self.replay_here = env.get(ENV_LINEAGE_REPLAY, "") != "later"
        """Whether this step sends its lineage to MLflow itself (run by hand)."""
        self.run_id: str | None = None
        self.url: str | None = None
        self._import: threading.Thread | None = None
        self.env = env
        self.metrics = StepMetrics(env, step=self.record.step)
        """The attempt's start, end and device-seconds, from the same times as its record."""

    # ---- recording (cheap, in memory) ------------------------------------------------------

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.record.params.update({k: param_value(v) for k, v in params.items()})

    def log_metric(
        self, key: str, value: float, step: int = 0, *, checkpoint: str | None = None
    ) -> None:
        """``checkpoint``: the URI of the checkpoint this value scores (evaluation)."""
        self.record.metrics.append(
            MetricPoint(key=key, value=float(value), step=int(step), checkpoint=checkpoint)
        )

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.record.tags.update({k: str(v) for k, v in tags.items()})

    def log_dataset(self, *, name: str, digest: str, source: str) -> None:
        self.record.datasets.append(DatasetRef(name=name, digest=digest, source=source))

    def log_checkpoint(self, ck: CheckpointRef) -> None:
        """A checkpoint this step wrote; spooled at once, so it survives a SIGKILL."""
        for p in self.record.metrics:
            if p.step == ck.step and p.checkpoint is None:
                p.checkpoint = ck.uri
        self.record.checkpoints_out.append(ck)
        self.save()

    def running(self) -> None:
        """Every process of the attempt runs (a gang: its rendezvous completed): the end of
        its queue wait."""
        self.record.tags[RUNNING_MS] = str(now_ms())

    def use_checkpoint(self, ck: CheckpointRef) -> None:
        """A checkpoint this step read (resumed from, evaluated, or inferred with)."""
        if all(c.uri != ck.uri for c in self.record.checkpoints_in):
            self.record.checkpoints_in.append(ck)

    def register_model(self, model_name: str, ck: CheckpointRef) -> None:
        """Register ``ck`` as a new version of ``model_name`` in the MLflow model registry."""
        self.use_checkpoint(ck)
        self.record.registration = Registration(model_name=model_name, checkpoint=ck)

    def log_outputs(self, uris: list[str]) -> None:
        self.record.outputs.extend(u for u in uris if u not in self.record.outputs)

    def save(self) -> None:
        """Spool the record as it is now (a crash later loses nothing recorded so far)."""
        if not self.enabled:
            return
        try:
            self.spool.write(self.record)
        except Exception as e:
            print(f"warning: lineage not spooled ({self.spool.root}): {e}", file=sys.stderr)

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> StepTracker:
        self.record.tags.update(attempt_tags(self.env, self.record.start_ms))
        h = held(self.env)
        self.metrics.started(self.record.start_ms / 1000, h.devices, h.device)
        if self.enabled and self.replay_here:
            self._import = threading.Thread(target=_import_mlflow, daemon=True)
            self._import.start()
        if self.enabled:
            # Spooled at once: an attempt killed outright is still recorded (closed as KILLED
            # when a later attempt or the end of the workflow is seen).
            self.save()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status = "FINISHED" if exc_type is None else "FAILED"
        if exc_type is not None and getattr(exc, "exit_code", None) == EXIT_PREEMPTED:
            status = "KILLED"
        self.flush(status)

    def flush(self, status: str = "FINISHED") -> None:
        """Close the record with ``status`` and spool it; run by hand, also send all that
        MLflow lacks."""
        self.record.end_ms = now_ms()
        self.metrics.ended(self.record.end_ms / 1000)
        if not self.enabled:
            return
        self.record.status = status  # type: ignore[assignment]
        self.save()
        if not self.replay_here:
            from gangway.lineage.links import record_link

            self._write_output(
                record_link(self.uri, self.record.workflow.pipeline, self.record.key)
            )
            return
        if self._import is not None:
            self._import.join()
        report: SyncReport | None = None
        try:
            report = sync(self.spool, self.uri, always={self.record.key})
            error = report.error
        except Exception as e:  # lineage must never fail the step it describes
            error = f"{type(e).__name__}: {e}"
        if report is not None and self.record.key in report.runs:
            self.run_id, self.url = report.runs[self.record.key]
            self._write_output(self.url)
        if error:
            print(
                f"warning: lineage not recorded in MLflow ({self.uri}): {error}; it is spooled "
                f"at {self.spool.root} and will be sent by the next step or "
                "`gangway lineage sync`",
                file=sys.stderr,
            )

    def _write_output(self, url: str) -> None:
        if self.outputs_dir and url:
            out = Path(self.outputs_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "mlflow_run_url").write_text(url)


@dataclass(frozen=True)
class WorkflowState:
    """What :func:`record_workflow` got done: the parent run and its link, or what is left."""

    parent: str | None
    url: str | None
    pending: int
    """Records (steps' and this one) still only in the spool."""
    error: str | None = None


def record_workflow(
    uri: str, workflow: WorkflowInfo, status: Status, spool_root: str, *, phase: str = ""
) -> WorkflowState:
    """Spool the workflow's own state, then send everything MLflow lacks.

    ``status`` RUNNING marks the parent run running again (``gangway retry``); FINISHED,
    FAILED or KILLED closes it (and any step attempt still RUNNING in the spool is closed as
    KILLED: nothing runs once the workflow has ended). Never raises: with MLflow unreachable
    everything stays spooled for ``gangway lineage sync``, which closes the parent run later.
    """
    spool = Spool(spool_root, uri)
    try:
        # One record per workflow, revised in place: the exit handler, `gangway run` and
        # `gangway retry` all write the same one.
        found = [r for r, _ in spool.records() if r.kind == "workflow"]
        record = found[0] if found else StepRecord(kind="workflow", workflow=workflow)
        record.step, record.workflow, record.status = "workflow", workflow, status
        record.end_ms = None if status == "RUNNING" else now_ms()
        if phase:
            record.tags[tag("phase")] = phase
        if status != "RUNNING":
            spool.close_running()
        spool.write(record)
    except Exception as e:
        return WorkflowState(None, None, -1, f"not spooled at {spool_root}: {e}")
    try:
        report = sync(spool, uri)
    except Exception as e:  # MLflow missing or broken: it all waits in the spool
        return WorkflowState(None, None, len(spool.pending()), f"{type(e).__name__}: {e}")
    parent, url = report.runs.get(record.key, (None, None))
    return WorkflowState(parent, url, len(report.pending), report.error)


def _import_mlflow() -> None:
    try:
        import mlflow.tracking  # noqa: F401
    except Exception:  # reported when the records are written
        return
