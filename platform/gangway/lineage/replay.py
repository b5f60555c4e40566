"""Send spooled records to MLflow, idempotently: replaying a record twice changes nothing.

Every object Gangway creates in MLflow carries the key of what it stands for — a run its
record key, the parent run its workflow uid, a checkpoint (an MLflow *logged model*) its URI,
a model version its evaluation record — and is found by that key before anything is created
(:mod:`gangway.lineage.ensure`). Metrics, params, tags and dataset inputs are idempotent in
MLflow itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gangway.contract import tag_value
from gangway.lineage.ensure import (
    chunks,
    ensure_checkpoint,
    ensure_experiment,
    ensure_parent,
    ensure_run,
    log_params,
    model_version_of,
    register,
    run_url,
)
from gangway.lineage.records import StepRecord, T, WorkflowInfo, mlflow_digest

if TYPE_CHECKING:
    from mlflow.entities import DatasetInput, Metric, RunTag

    from gangway.lineage.records import DatasetRef

__all__ = ["SyncIds", "dataset_input", "replay"]


@dataclass
class SyncIds:
    """The ids a sync carries from one record to the next, so each is looked up once."""

    experiments: dict[str, str] = field(default_factory=dict)
    """Pipeline → its experiment's id."""
    parents: dict[str, str] = field(default_factory=dict)
    """Workflow uid → its parent run's id."""

    def locate(self, client: Any, wf: WorkflowInfo) -> tuple[str, str | None]:
        """The workflow's experiment and parent run (none without a workflow uid)."""
        if wf.pipeline not in self.experiments:
            self.experiments[wf.pipeline] = ensure_experiment(client, wf.pipeline)
        exp_id = self.experiments[wf.pipeline]
        if not wf.uid:
            return exp_id, None
        if wf.uid not in self.parents:
            self.parents[wf.uid] = ensure_parent(client, exp_id, wf)
        return exp_id, self.parents[wf.uid]


def replay(
    client: Any, tracking_uri: str, rec: StepRecord, ids: SyncIds | None = None
) -> tuple[str, str]:
    """Write ``rec`` to MLflow (idempotently); returns ``(run_id, run_url)``.

    ``ids`` carries the experiment and parent run ids from one record to the next of a sync.
    """
    exp_id, parent = (ids or SyncIds()).locate(client, rec.workflow)
    if rec.kind == "workflow":
        return _workflow_state(client, tracking_uri, exp_id, parent, rec)
    return _step_run(client, tracking_uri, exp_id, parent, rec)


def _step_run(
    client: Any, tracking_uri: str, exp_id: str, parent: str | None, rec: StepRecord
) -> tuple[str, str]:
    """The step's run, with its checkpoints, metrics, params, tags, inputs and outputs."""
    run_id = ensure_run(client, exp_id, rec, parent)
    url = run_url(tracking_uri, exp_id, run_id)
    produced = {c.uri: ensure_checkpoint(client, exp_id, c, run_id) for c in rec.checkpoints_out}
    consumed = {c.uri: ensure_checkpoint(client, exp_id, c, None) for c in rec.checkpoints_in}
    metrics = _metrics(rec, {**consumed, **produced})
    tags = {**_step_tags(rec, url, consumed), **_model_tags(client, exp_id, rec, run_id, consumed)}
    _log_run_data(client, run_id, metrics, rec.params, tags)
    _log_inputs_outputs(client, run_id, rec, produced, consumed)
    if rec.status != "RUNNING":
        client.set_terminated(run_id, status=rec.status, end_time=rec.end_ms)
    return run_id, url


def _metrics(rec: StepRecord, models: dict[str, str]) -> list[Metric]:
    """The record's metric points, each linked to the logged model of its checkpoint."""
    from mlflow.entities import Metric

    return [
        Metric(p.key, p.value, p.timestamp, p.step, model_id=models.get(p.checkpoint or ""))
        for p in rec.metrics
    ]


def _step_tags(rec: StepRecord, url: str, consumed: dict[str, str]) -> dict[str, str]:
    return {
        **rec.tags,
        f"{T}.url": url,
        f"{T}.status": rec.status,
        **({f"{T}.outputs": json.dumps(rec.outputs)} if rec.outputs else {}),
        # Searches do not return a run's model inputs; the graph reads them from here.
        **({f"{T}.checkpoints_in": json.dumps(sorted(consumed.values()))} if consumed else {}),
    }


def _model_tags(
    client: Any, exp_id: str, rec: StepRecord, run_id: str, consumed: dict[str, str]
) -> dict[str, str]:
    """The model version the step registers, else the one of a checkpoint it consumed."""
    if rec.registration is not None:
        ck = rec.registration.checkpoint
        model_id = consumed.get(ck.uri) or ensure_checkpoint(client, exp_id, ck, None)
        return {f"{T}.registered": register(client, rec, run_id, model_id)}
    tags: dict[str, str] = {}
    for uri in consumed:
        version = model_version_of(client, uri)
        if version:
            tags[f"{T}.model_version"] = version
    return tags


def _log_run_data(
    client: Any, run_id: str, metrics: list[Metric], params: dict[str, str], tags: dict[str, str]
) -> None:
    """Metrics, params and tags, in batches MLflow accepts."""
    for chunk in chunks(metrics, 1000):
        client.log_batch(run_id, metrics=list(chunk))
    log_params(client, run_id, params)
    for chunk in chunks(_tag_list(tags), 100):
        client.log_batch(run_id, tags=list(chunk))


def _tag_list(tags: dict[str, str]) -> list[RunTag]:
    from mlflow.entities import RunTag

    return [RunTag(k, tag_value(v)) for k, v in sorted(tags.items())]


def _log_inputs_outputs(
    client: Any, run_id: str, rec: StepRecord, produced: dict[str, str], consumed: dict[str, str]
) -> None:
    """Datasets and consumed checkpoints in, produced checkpoints out (URI → model id)."""
    from mlflow.entities import LoggedModelInput, LoggedModelOutput

    have = client.get_run(run_id)
    # Model inputs/outputs are not idempotent in MLflow (a unique key): send only new ones.
    known_in = {m.model_id for m in (have.inputs.model_inputs if have.inputs else [])}
    known_out = {m.model_id for m in (have.outputs.model_outputs if have.outputs else [])}
    consumed = {k: v for k, v in consumed.items() if v not in known_in}
    produced = {k: v for k, v in produced.items() if v not in known_out}
    if rec.datasets or consumed:
        client.log_inputs(
            run_id,
            datasets=[dataset_input(d) for d in rec.datasets] or None,
            models=[LoggedModelInput(m) for m in consumed.values()] or None,
        )
    if produced:
        client.log_outputs(
            run_id,
            models=[
                LoggedModelOutput(produced[c.uri], c.step)
                for c in rec.checkpoints_out
                if c.uri in produced
            ],
        )


def dataset_input(d: DatasetRef) -> DatasetInput:
    from mlflow.entities import Dataset, DatasetInput

    profile = json.dumps({"sha256": d.digest})
    digest = mlflow_digest(d.digest)
    return DatasetInput(Dataset(d.name, digest, _source_type(d.source), d.source, profile=profile))


def _workflow_state(
    client: Any, tracking_uri: str, exp_id: str, parent: str | None, rec: StepRecord
) -> tuple[str, str]:
    """The parent run takes the workflow's state: RUNNING again (a retry) or closed."""
    if parent is None:
        raise ValueError(f"{rec.file_name}: a workflow record needs the workflow's uid")
    if rec.tags:
        client.log_batch(parent, tags=_tag_list(rec.tags))
    if rec.status == "RUNNING":
        client.update_run(parent, status="RUNNING")
    else:
        client.set_terminated(parent, status=rec.status, end_time=rec.end_ms)
    if tracking_uri.startswith(("http://", "https://")):
        from gangway.lineage.links import workflow_runs_url

        return parent, workflow_runs_url(tracking_uri, exp_id, rec.workflow.uid)
    return parent, run_url(tracking_uri, exp_id, parent)


def _source_type(uri: str) -> str:
    return {"s3": "s3", "file": "local", "http": "http", "https": "http"}.get(
        uri.split("://", 1)[0], "code"
    )
