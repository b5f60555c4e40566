"""Step lineage against a real MLflow tracking server (sqlite backend) started by a fixture."""

from __future__ import annotations

import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from gangway.lineage.records import WorkflowInfo
from gangway.step.tracking import StepTracker, record_workflow

SESSION = uuid.uuid4().hex[:8]
SPOOLS = Path(tempfile.mkdtemp(prefix="gangway-spools-"))


def _env(uri: str, uid: str, step: str) -> dict[str, str]:
    uid = f"{uid}-{SESSION}"  # a fresh workflow (and spool) per test session
    return {
        "GANGWAY_LINEAGE_SPOOL": str(SPOOLS / uid),
        "MLFLOW_TRACKING_URI": uri,
        "GANGWAY_PIPELINE": "p-test",
        "GANGWAY_WORKFLOW_NAME": f"wf-{uid}",
        "GANGWAY_WORKFLOW_UID": uid,
        "GANGWAY_STEP": step,
    }


def test_steps_share_one_parent_run_per_workflow(mlflow_server: str) -> None:
    from mlflow.tracking import MlflowClient

    for step in ("stage", "train"):
        with StepTracker(env=_env(mlflow_server, "u1", step)) as t:
            t.log_params({"lr": 0.1})
            t.log_metric("loss", 3.0, 1)
            t.log_metric("loss", 2.0, 2)
            if step == "stage":
                t.log_dataset(name="corpus", digest="sha256:abc", source="file:///d")
        assert t.run_id and t.url and t.url.startswith(mlflow_server)
    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("p-test")
    assert exp is not None
    uid = f"u1-{SESSION}"
    runs = client.search_runs([exp.experiment_id], f"tags.gangway.workflow_uid = '{uid}'")
    parents = [r for r in runs if r.data.tags["gangway.kind"] == "workflow"]
    steps = [r for r in runs if r.data.tags["gangway.kind"] == "step"]
    assert len(parents) == 1 and len(steps) == 2
    assert {r.data.tags["mlflow.parentRunId"] for r in steps} == {parents[0].info.run_id}
    train = next(r for r in steps if r.data.tags["gangway.step"] == "train")
    history = client.get_metric_history(train.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 3.0), (2, 2.0)]
    stage = next(r for r in steps if r.data.tags["gangway.step"] == "stage")
    assert stage.inputs is not None
    assert [d.dataset.digest for d in stage.inputs.dataset_inputs] == ["abc"]
    info = WorkflowInfo(pipeline="p-test", name="u1", uid=uid)
    spool = str(SPOOLS / uid)
    state = record_workflow(mlflow_server, info, "FINISHED", spool, phase="Succeeded")
    assert (state.parent, state.pending, state.error) == (parents[0].info.run_id, 0, None)
    closed = client.get_run(parents[0].info.run_id)
    assert closed.info.status == "FINISHED" and closed.data.tags["gangway.phase"] == "Succeeded"


def test_step_writes_its_run_url_output(mlflow_server: str, tmp_path: Path) -> None:
    env = {**_env(mlflow_server, "u4", "evaluate"), "GANGWAY_OUTPUTS": str(tmp_path / "out")}
    with StepTracker(env=env) as t:
        t.log_metric("val_loss", 2.5, 100)
    url = (tmp_path / "out" / "mlflow_run_url").read_text()
    assert url == t.url and url.startswith(f"{mlflow_server}/#/experiments/")
    assert url.endswith(f"/runs/{t.run_id}")


def test_failed_step_is_recorded_as_failed(mlflow_server: str) -> None:
    from mlflow.tracking import MlflowClient

    with pytest.raises(RuntimeError), StepTracker(env=_env(mlflow_server, "u2", "x")) as t:
        raise RuntimeError("boom")
    assert t.run_id is not None
    assert MlflowClient(tracking_uri=mlflow_server).get_run(t.run_id).info.status == "FAILED"


def test_unreachable_server_never_fails_the_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with StepTracker(env=_env(f"http://127.0.0.1:{port}", "u3", "x")) as t:
        t.log_metric("loss", 1.0)
    assert t.run_id is None
    assert "lineage not recorded" in capsys.readouterr().err


def test_tracking_is_off_without_a_tracking_uri(tmp_path: Path) -> None:
    with StepTracker(env={}) as t:
        t.log_metric("loss", 1.0)
    assert not t.enabled and t.run_id is None


def test_replay_after_a_race_keeps_one_run_per_record(mlflow_server: str) -> None:
    """Two replays that raced both created the step's run: the next replay keeps the smaller
    id, deletes the other, and adds no metric twice."""
    from mlflow.tracking import MlflowClient

    from gangway.lineage.ensure import ensure_experiment
    from gangway.lineage.records import MetricPoint, StepRecord, workflow_from_env
    from gangway.lineage.replay import replay

    env = _env(mlflow_server, "race", "train")
    rec = StepRecord(workflow=workflow_from_env(env), step="train", status="FINISHED")
    rec.metrics = [MetricPoint(key="loss", value=v, step=s) for s, v in ((1, 3.0), (2, 2.0))]
    client = MlflowClient(tracking_uri=mlflow_server)
    run_id, _ = replay(client, mlflow_server, rec)
    exp = ensure_experiment(client, "p-test")
    twin = client.create_run(exp, tags={"gangway.record": rec.key, "gangway.kind": "step"})
    again, _ = replay(client, mlflow_server, rec)
    assert again == min(run_id, twin.info.run_id)
    alive = client.search_runs([exp], f"tags.`gangway.record` = '{rec.key}'")
    assert [r.info.run_id for r in alive] == [again]
    history = client.get_metric_history(again, "loss")  # whichever survived has each once
    assert [(m.step, m.value) for m in history] == [(1, 3.0), (2, 2.0)]
