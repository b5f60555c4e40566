"""Send spooled records to MLflow, idempotently: replaying a record twice changes nothing.

Every object Gangway creates in MLflow carries the key of what it stands for — a run its
record key, the parent run its workflow uid, a checkpoint (an MLflow *logged model*) its URI,
a model version its evaluation record — and is found by that key before anything is created.
Two writers racing on the same key (an outage replayed by two steps at once) can both create;
:func:`_ensure` then keeps the smallest id and deletes the rest, and everyone converges on it.
Metrics, params, tags and dataset inputs are idempotent in MLflow itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gangway.contract import param_value, tag_value
from gangway.lineage.records import CheckpointRef, StepRecord, T, WorkflowInfo, mlflow_digest

if TYPE_CHECKING:
    from mlflow.entities import DatasetInput, Metric, RunTag

    from gangway.lineage.records import DatasetRef

__all__ = ["SyncIds", "ensure_experiment", "parent_query", "replay", "run_url"]


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A link to a run in the MLflow UI (for http(s) tracking servers), else a run reference."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"runs:/{run_id}"


def _q(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _ensure(
    find: Callable[[], list[str]],
    create: Callable[[], object],
    delete: Callable[[str, str], object],
) -> str:
    """The one object ``find`` names: created if missing, duplicates from races removed
    (``delete(duplicate, kept)``)."""
    ids = find()
    if not ids:
        create()
        ids = find()
    keep = min(ids)
    for other in ids:
        if other != keep:
            delete(other, keep)
    return keep


def _chunks(items: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def ensure_experiment(client: Any, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name))
    except Exception:  # created meanwhile by another step
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def parent_query(workflow_uid: str) -> str:
    """The MLflow search filter for a workflow's parent run."""
    return f"tags.`{T}.workflow_uid` = '{_q(workflow_uid)}' and tags.`{T}.kind` = 'workflow'"


def _runs(client: Any, exp_id: str, query: str) -> list[str]:
    return sorted(str(r.info.run_id) for r in client.search_runs([exp_id], query, max_results=50))


def ensure_parent(client: Any, exp_id: str, wf: WorkflowInfo) -> str:
    """The workflow's parent run, tagged with where and what ran."""

    def delete(run_id: str, keep: str) -> None:
        for child in _runs(client, exp_id, f"tags.`mlflow.parentRunId` = '{run_id}'"):
            client.set_tag(child, "mlflow.parentRunId", keep)
        client.delete_run(run_id)

    def find() -> list[str]:
        return _runs(client, exp_id, parent_query(wf.uid))

    def create() -> None:
        client.create_run(
            exp_id,
            run_name=wf.name or wf.uid,
            tags={
                f"{T}.kind": "workflow",
                f"{T}.workflow": wf.name,
                f"{T}.workflow_uid": wf.uid,
                f"{T}.pipeline": wf.pipeline,
                f"{T}.namespace": wf.namespace,
                f"{T}.cluster": wf.cluster,
                f"{T}.git_sha": wf.git_sha,
                f"{T}.image": wf.image,
            },
        )

    parent = _ensure(find, create, delete)
    _log_params(client, parent, wf.parameters)
    return parent


def _log_params(client: Any, run_id: str, params: dict[str, str]) -> None:
    """Log the params the run lacks. Params are write-once in MLflow, and two replays of the
    same record (two steps syncing at once) can race to insert them: the loser's error is
    harmless when the run now has every value."""
    from mlflow.entities import Param

    want = {k: param_value(v) for k, v in params.items()}
    have = client.get_run(run_id).data.params
    missing = [Param(k, v) for k, v in sorted(want.items()) if k not in have]
    try:
        for chunk in _chunks(missing, 100):
            client.log_batch(run_id, params=list(chunk))
    except Exception:
        have = client.get_run(run_id).data.params
        if any(have.get(k) != v for k, v in want.items()):
            raise


def ensure_checkpoint(client: Any, exp_id: str, ck: CheckpointRef, training_run: str | None) -> str:
    """The checkpoint's MLflow logged model (model_type ``checkpoint``), keyed by its URI."""
    from mlflow.entities import LoggedModelStatus

    tags = {
        f"{T}.checkpoint_uri": ck.uri,
        f"{T}.checkpoint_step": str(ck.step),
        f"{T}.checkpoint_digest": ck.digest,
        f"{T}.dataset_digest": ck.dataset_digest,
    }

    def find() -> list[str]:
        found = client.search_logged_models(
            experiment_ids=[exp_id],
            filter_string=f"tags.`{T}.checkpoint_uri` = '{_q(ck.uri)}'",
        )
        return sorted(str(m.model_id) for m in found)

    def create() -> None:
        model = client.create_logged_model(
            experiment_id=exp_id,
            name=f"checkpoint-{ck.step:08d}",
            source_run_id=training_run,
            tags={k: v for k, v in tags.items() if v},
            params={"step": str(ck.step), **{k: repr(v) for k, v in ck.metrics.items()}},
            model_type="checkpoint",
        )
        client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)

    model_id = _ensure(find, create, lambda other, _: client.delete_logged_model(other))
    if training_run:
        client.set_logged_model_tags(model_id, {f"{T}.training_run": training_run})
    return model_id


def _ensure_run(client: Any, exp_id: str, rec: StepRecord, parent: str | None) -> str:
    tags = {
        f"{T}.kind": "step",
        f"{T}.record": rec.key,
        f"{T}.step": rec.step,
        f"{T}.node": rec.node,
        f"{T}.workflow": rec.workflow.name,
        f"{T}.workflow_uid": rec.workflow.uid,
        **({"mlflow.parentRunId": parent} if parent else {}),
    }
    return _ensure(
        lambda: _runs(client, exp_id, f"tags.`{T}.record` = '{_q(rec.key)}'"),
        lambda: client.create_run(
            exp_id, start_time=rec.start_ms, tags=tags, run_name=_run_name(rec)
        ),
        lambda other, _: client.delete_run(other),
    )


def _run_name(rec: StepRecord) -> str:
    return f"{rec.step} {rec.node.rsplit('/', 1)[-1]}" if rec.node else rec.step


def _register(client: Any, rec: StepRecord, run_id: str, model_id: str) -> str:
    """Register evaluation's best checkpoint as a model version (once per record)."""
    assert rec.registration is not None
    name = rec.registration.model_name
    ck = rec.registration.checkpoint
    if not client.search_registered_models(f"name = '{_q(name)}'"):
        try:
            client.create_registered_model(name)
        except Exception:  # registered meanwhile by another replay
            client.get_registered_model(name)
    model = client.get_logged_model(model_id)
    tags = {
        f"{T}.record": rec.key,
        f"{T}.checkpoint": ck.uri,
        f"{T}.checkpoint_step": str(ck.step),
        f"{T}.checkpoint_digest": ck.digest,
        f"{T}.dataset_digest": ck.dataset_digest,
        f"{T}.training_run": (model.tags or {}).get(f"{T}.training_run", ""),
        f"{T}.evaluation_run": run_id,
        f"{T}.workflow_uid": rec.workflow.uid,
    }

    def find() -> list[str]:
        found = client.search_model_versions(
            f"name = '{_q(name)}' and tags.`{T}.record` = '{_q(rec.key)}'"
        )
        return sorted((str(v.version) for v in found), key=int)

    version = _ensure(
        find,
        lambda: client.create_model_version(
            name, source=f"models:/{model_id}", run_id=run_id, tags=tags, model_id=model_id
        ),
        lambda v, _: client.delete_model_version(name, v),
    )
    return f"{name}/{version}"


def _model_version_of(client: Any, checkpoint_uri: str) -> str | None:
    found = client.search_model_versions(f"tags.`{T}.checkpoint` = '{_q(checkpoint_uri)}'")
    if not found:
        return None
    v = min(found, key=lambda v: int(v.version))
    return f"{v.name}/{v.version}"


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
    run_id = _ensure_run(client, exp_id, rec, parent)
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
        return {f"{T}.registered": _register(client, rec, run_id, model_id)}
    tags: dict[str, str] = {}
    for uri in consumed:
        version = _model_version_of(client, uri)
        if version:
            tags[f"{T}.model_version"] = version
    return tags


def _log_run_data(
    client: Any, run_id: str, metrics: list[Metric], params: dict[str, str], tags: dict[str, str]
) -> None:
    """Metrics, params and tags, in batches MLflow accepts."""
    for chunk in _chunks(metrics, 1000):
        client.log_batch(run_id, metrics=list(chunk))
    _log_params(client, run_id, params)
    for chunk in _chunks(_tag_list(tags), 100):
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
            datasets=[_dataset_input(d) for d in rec.datasets] or None,
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


def _dataset_input(d: DatasetRef) -> DatasetInput:
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
        from gangway.links import workflow_runs_url

        return parent, workflow_runs_url(tracking_uri, exp_id, rec.workflow.uid)
    return parent, run_url(tracking_uri, exp_id, parent)


def _source_type(uri: str) -> str:
    return {"s3": "s3", "file": "local", "http": "http", "https": "http"}.get(
        uri.split("://", 1)[0], "code"
    )
