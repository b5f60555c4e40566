"""Finding or creating each MLflow object by the key of what it stands for — the experiment
of a pipeline, the parent run of a workflow, a step's run, a checkpoint's logged model, a model
version — so that replaying a record twice changes nothing.

Two writers racing on the same key (an outage replayed by two steps at once) can both create;
:func:`ensure_one` then keeps the smallest id and deletes the rest, and everyone converges on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gangway.contract import param_value
from gangway.lineage.records import CheckpointRef, StepRecord, T, WorkflowInfo

__all__ = [
    "chunks",
    "ensure_checkpoint",
    "ensure_experiment",
    "ensure_one",
    "ensure_parent",
    "ensure_run",
    "log_params",
    "model_version_of",
    "parent_query",
    "register",
    "run_url",
]


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A link to a run in the MLflow UI (for http(s) tracking servers), else a run reference."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"runs:/{run_id}"


def _q(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def ensure_one(
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


def chunks(items: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
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

    parent = ensure_one(find, create, delete)
    log_params(client, parent, wf.parameters)
    return parent


def log_params(client: Any, run_id: str, params: dict[str, str]) -> None:
    """Log the params the run lacks. Params are write-once in MLflow, and two replays of the
    same record (two steps syncing at once) can race to insert them: the loser's error is
    harmless when the run now has every value."""
    from mlflow.entities import Param

    want = {k: param_value(v) for k, v in params.items()}
    have = client.get_run(run_id).data.params
    missing = [Param(k, v) for k, v in sorted(want.items()) if k not in have]
    try:
        for chunk in chunks(missing, 100):
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

    model_id = ensure_one(find, create, lambda other, _: client.delete_logged_model(other))
    if training_run:
        client.set_logged_model_tags(model_id, {f"{T}.training_run": training_run})
    return model_id


def ensure_run(client: Any, exp_id: str, rec: StepRecord, parent: str | None) -> str:
    tags = {
        f"{T}.kind": "step",
        f"{T}.record": rec.key,
        f"{T}.step": rec.step,
        f"{T}.node": rec.node,
        f"{T}.workflow": rec.workflow.name,
        f"{T}.workflow_uid": rec.workflow.uid,
        **({"mlflow.parentRunId": parent} if parent else {}),
    }
    return ensure_one(
        lambda: _runs(client, exp_id, f"tags.`{T}.record` = '{_q(rec.key)}'"),
        lambda: client.create_run(
            exp_id, start_time=rec.start_ms, tags=tags, run_name=_run_name(rec)
        ),
        lambda other, _: client.delete_run(other),
    )


def _run_name(rec: StepRecord) -> str:
    return f"{rec.step} {rec.node.rsplit('/', 1)[-1]}" if rec.node else rec.step


def register(client: Any, rec: StepRecord, run_id: str, model_id: str) -> str:
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

    version = ensure_one(
        find,
        lambda: client.create_model_version(
            name, source=f"models:/{model_id}", run_id=run_id, tags=tags, model_id=model_id
        ),
        lambda v, _: client.delete_model_version(name, v),
    )
    return f"{name}/{version}"


def model_version_of(client: Any, checkpoint_uri: str) -> str | None:
    found = client.search_model_versions(f"tags.`{T}.checkpoint` = '{_q(checkpoint_uri)}'")
    if not found:
        return None
    v = min(found, key=lambda v: int(v.version))
    return f"{v.name}/{v.version}"
