"""The reference pipeline as ``make demo`` runs it — the suite's shared run and its cached
re-run — checked end to end: every step, the gang's pods, each checkpoint evaluated, each
shard inferred once, the lineage in MLflow, and the caching of the second run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ReferenceRuns


@pytest.mark.e2e
def test_run_reference_pipeline_end_to_end(reference_runs: ReferenceRuns) -> None:
    """The compiled reference pipeline, executed locally: real staging, a 2-pod torchrun gang,
    evaluation of every checkpoint, and inference over every shard exactly once."""
    state, res = reference_runs.state, reference_runs.first.out
    assert "cached" not in res.stdout
    assert "Succeeded" in res.stdout and "train-eval-infer" in res.stdout
    run_dir = state / "storage" / "runs" / reference_runs.first.uid
    evaluated = next(n for n in _nodes(state, reference_runs.first.name) if n["task"] == "evaluate")
    metrics = json.loads(evaluated["outputs"]["scores"])  # an output parameter of the step
    losses = [c["loss"] for c in metrics["checkpoints"]]
    assert [c["step"] for c in metrics["checkpoints"]] == [10, 20]
    assert losses[-1] < losses[0], f"validation loss should fall: {losses}"
    assert metrics["best"]["loss"] == min(losses)
    preds = sorted((run_dir / "predictions").glob("shard-*.jsonl"))
    assert len(preds) == 2
    ids = [json.loads(line)["id"] for p in preds for line in p.read_text().splitlines()]
    docs = (state / "storage" / "demo" / "inputs.jsonl").read_text().splitlines()
    assert sorted(ids) == sorted(json.loads(d)["id"] for d in docs)  # each exactly once
    assert len(ids) == len(set(ids))
    logs = state / "runs" / reference_runs.first.name / "logs" / "train"
    assert sorted(p.name for p in logs.iterdir()) == ["master-0.log", "worker-0.log"]
    _check_lineage(reference_runs.tracking_uri, reference_runs.first.uid)
    assert f"mlflow ui --backend-store-uri sqlite:///{state}/mlflow.db" in res.stdout
    # The same run again on the same data: staging is cached, training runs (it is not
    # cacheable) and writes the very same checkpoints, so their evaluation is cached too.
    again = reference_runs.second.out
    nodes = _nodes(state, reference_runs.second.name)
    assert {n["task"] for n in nodes if n["cached"]} == {"stage", "evaluate"}
    assert again.stdout.count("cached") >= 2
    new_best = next(n for n in nodes if n["task"] == "evaluate")["outputs"]["best"]
    assert new_best.startswith(f"file://{run_dir}/checkpoints/")  # the first run's, verified


def _nodes(state: Path, name: str) -> list[dict[str, Any]]:
    """The nodes of the local run ``name`` in ``state``."""
    nodes: list[dict[str, Any]] = json.loads((state / "runs" / name / "nodes.json").read_text())[
        "nodes"
    ]
    return nodes


def _check_lineage(uri: str, workflow_uid: str) -> None:
    """Every step left a child run under one parent run for the workflow."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("train-eval-infer")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], f"tags.gangway.workflow_uid = '{workflow_uid}'")
    (parent,) = [r for r in runs if r.data.tags["gangway.kind"] == "workflow"]
    assert parent.info.status == "FINISHED"
    steps = sorted(
        r.data.tags["gangway.step"] for r in runs if r.data.tags["gangway.kind"] == "step"
    )
    assert steps == ["evaluate", "infer", "infer", "split", "stage", "train"]
    train = next(r for r in runs if r.data.tags.get("gangway.step") == "train")
    losses = [m.value for m in client.get_metric_history(train.info.run_id, "loss")]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    # Every checkpoint is a lineage node: an MLflow logged model made by the training run.
    checkpoints = client.search_logged_models(
        [exp.experiment_id], f"tags.`gangway.training_run` = '{train.info.run_id}'"
    )
    assert len(checkpoints) == 2
