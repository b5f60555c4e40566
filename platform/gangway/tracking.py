"""Lineage records from a step to MLflow: one parent run per workflow, one child run per step.

A step opens a :class:`StepTracker` and records as it works (params, metrics, a dataset, its
outputs); nothing touches MLflow until the step ends, when the records are written in batches.
MLflow is imported on a background thread as soon as the tracker opens, so the import overlaps
with the step's own work. Tracking is on when ``MLFLOW_TRACKING_URI`` is set; pipelines set it
(and the workflow identity) for every step from the ``mlflow-tracking-uri`` parameter, and
``gangway run`` points it at a sqlite store under its state directory.

If MLflow cannot be reached the step still succeeds and says so on stderr: lineage must never
fail the work it describes.

Environment read: ``MLFLOW_TRACKING_URI``, ``GANGWAY_PIPELINE``, ``GANGWAY_WORKFLOW_NAME``,
``GANGWAY_WORKFLOW_UID``, ``GANGWAY_STEP``, and ``GANGWAY_OUTPUTS`` (where the step writes its
``mlflow_run_url`` output parameter).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["StepTracker", "finish_workflow", "run_url"]

_TAG = "gangway"


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A link to a run in the MLflow UI (for http(s) tracking servers), else a run reference."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"runs:/{run_id}"


class StepTracker:
    """Collects one step's lineage and writes it to MLflow when the step ends."""

    def __init__(self, step: str | None = None, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.uri = env.get("MLFLOW_TRACKING_URI", "")
        self.enabled = bool(self.uri)
        self.pipeline = env.get("GANGWAY_PIPELINE", "adhoc")
        self.workflow = env.get("GANGWAY_WORKFLOW_NAME", "")
        self.workflow_uid = env.get("GANGWAY_WORKFLOW_UID", "")
        self.step = step or env.get("GANGWAY_STEP", "step")
        self.outputs_dir = env.get("GANGWAY_OUTPUTS", "")
        self.params: dict[str, str] = {}
        self.tags: dict[str, str] = {}
        self.metrics: list[tuple[str, float, int, int]] = []
        self.datasets: list[dict[str, str]] = []
        self.run_id: str | None = None
        self.url: str | None = None
        self._import: threading.Thread | None = None

    # ---- recording (cheap) ---------------------------------------------------------------

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.params.update({k: str(v)[:6000] for k, v in params.items()})

    def log_metric(self, key: str, value: float, step: int = 0) -> None:
        self.metrics.append((key, float(value), int(step), int(time.time() * 1000)))

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.tags.update({k: str(v) for k, v in tags.items()})

    def log_dataset(self, *, name: str, digest: str, source: str) -> None:
        self.datasets.append({"name": name, "digest": digest, "source": source})

    # ---- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> StepTracker:
        if self.enabled:
            self._import = threading.Thread(target=_import_mlflow, daemon=True)
            self._import.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status = "FINISHED" if exc_type is None else "FAILED"
        if exc_type is not None and getattr(exc, "exit_code", None) == 143:
            status = "KILLED"
        self.flush(status)

    def flush(self, status: str = "FINISHED") -> None:
        """Write everything recorded so far as this step's child run."""
        if not self.enabled:
            return
        try:
            self._write(status)
        except Exception as e:  # lineage must never fail the step it describes
            print(f"warning: lineage not recorded in MLflow ({self.uri}): {e}", file=sys.stderr)

    def _write(self, status: str) -> None:
        if self._import is not None:
            self._import.join()
        from mlflow.entities import Dataset, DatasetInput, Metric, Param, RunTag
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name(self.pipeline)
        exp_id = exp.experiment_id if exp else client.create_experiment(self.pipeline)
        parent = self._parent(client, exp_id)
        tags = {
            "mlflow.runName": self.step,
            f"{_TAG}.kind": "step",
            f"{_TAG}.step": self.step,
            f"{_TAG}.workflow": self.workflow,
            f"{_TAG}.workflow_uid": self.workflow_uid,
            **({"mlflow.parentRunId": parent} if parent else {}),
            **self.tags,
        }
        run = client.create_run(exp_id, tags=tags)
        self.run_id = run.info.run_id
        client.log_batch(
            self.run_id,
            metrics=[Metric(k, v, ts, s) for k, v, s, ts in self.metrics],
            params=[Param(k, v) for k, v in self.params.items()],
            tags=[RunTag(f"{_TAG}.url", run_url(self.uri, exp_id, self.run_id))],
        )
        if self.datasets:
            client.log_inputs(
                self.run_id,
                datasets=[
                    DatasetInput(Dataset(d["name"], d["digest"], "uri", d["source"]))
                    for d in self.datasets
                ],
            )
        client.set_terminated(self.run_id, status=status)
        self.url = run_url(self.uri, exp_id, self.run_id)
        if self.outputs_dir:
            out = Path(self.outputs_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "mlflow_run_url").write_text(self.url)

    def _parent(self, client: Any, exp_id: str) -> str | None:
        """The workflow's parent run, created by whichever step gets there first."""
        if not self.workflow_uid:
            return None
        query = (
            f"tags.{_TAG}.workflow_uid = '{self.workflow_uid}' and tags.{_TAG}.kind = 'workflow'"
        )
        found = client.search_runs([exp_id], filter_string=query, order_by=["start_time ASC"])
        if found:
            return str(found[0].info.run_id)
        run = client.create_run(
            exp_id,
            tags={
                "mlflow.runName": self.workflow or self.workflow_uid,
                f"{_TAG}.kind": "workflow",
                f"{_TAG}.workflow": self.workflow,
                f"{_TAG}.workflow_uid": self.workflow_uid,
                f"{_TAG}.pipeline": self.pipeline,
            },
        )
        return str(run.info.run_id)


def finish_workflow(uri: str, pipeline: str, workflow_uid: str, phase: str) -> str | None:
    """Close the workflow's parent run with the workflow's phase; returns its run id."""
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(pipeline)
        if exp is None:
            return None
        query = f"tags.{_TAG}.workflow_uid = '{workflow_uid}' and tags.{_TAG}.kind = 'workflow'"
        runs = client.search_runs([exp.experiment_id], filter_string=query)
        for run in runs:
            client.set_tag(run.info.run_id, f"{_TAG}.phase", phase)
            client.set_terminated(run.info.run_id, "FINISHED" if phase == "Succeeded" else "FAILED")
        return str(runs[0].info.run_id) if runs else None
    except Exception as e:
        print(f"warning: could not close the workflow's MLflow run: {e}", file=sys.stderr)
        return None


def _import_mlflow() -> None:
    try:
        import mlflow.tracking  # noqa: F401
    except Exception:  # reported when the records are written
        return
