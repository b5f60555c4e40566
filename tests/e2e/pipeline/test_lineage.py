"""Lineage end to end: the reference pipeline, run locally (the suite's shared runs, a sqlite
store), produces the whole graph; ``gangway lineage`` walks it both ways; a sync sends it whole
to another store; an outage of a real MLflow tracking server mid-run ends with a complete
graph and no duplicates."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from gangway.lineage.links import controller_links
from gangway.lineage.spool import Spool
from tests.helpers import GANGWAY, REPO, LoopbackProxy, ReferenceRuns, gangway
from tests.helpers.builders import argo_process_url
from tests.helpers.builders import linked_workflow as _workflow

PIPELINE = "pipelines/train_eval_infer.py"
STEPS = Counter({"stage": 1, "split": 1, "train": 1, "evaluate": 1, "infer": 2})
ONE_SHARD = STEPS - Counter({"infer": 1})


@dataclass(frozen=True)
class Run:
    name: str
    uid: str


def _lineage(uri: str, ref: str) -> dict[str, Any]:
    res = gangway("lineage", ref, "--json", "--tracking-uri", uri)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _ids(tree: dict[str, Any]) -> list[str]:
    return [tree["id"], *(i for c in tree.get("children", []) for i in _ids(c))]


def _path(tree: dict[str, Any], kinds: list[str]) -> bool:
    """Is there a chain of node kinds ``kinds`` going down from the tree's root?"""
    if not kinds:
        return True
    return any(
        c["id"].startswith(kinds[0] + ":") and _path(c, kinds[1:]) for c in tree.get("children", [])
    )


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _assert_complete(doc: dict[str, Any], uid: str, expected: Counter[str] = STEPS) -> None:
    """From the workflow, downstream reaches every step run, the data, both checkpoints, the
    registered version and both outputs."""
    reached = set(_ids(doc["downstream"]))
    nodes = doc["nodes"]
    # (a shared dataset also leads to other workflows' nodes: count this one's, by its uid)
    kinds = Counter(
        i.split(":", 1)[0]
        for i in reached
        if uid in i
        or uid in str(nodes[i].get("uri", nodes[i].get("checkpoint_uri", "")))
        or i.startswith("dataset:")
    )
    assert kinds["dataset"] == 1 and kinds["checkpoint"] == 2 and kinds["model"] == 1
    assert kinds["output"] == expected["infer"]
    steps = Counter(
        doc["nodes"][i]["step"]
        for i in reached
        if i.startswith("run:") and doc["nodes"][i].get("workflow_uid") == uid
    )
    assert steps == expected


def _step_runs(uri: str, uid: str) -> list[Any]:
    client = _client(uri)
    exp = client.get_experiment_by_name("train-eval-infer")
    assert exp is not None
    return list(client.search_runs([exp.experiment_id], f"tags.`gangway.workflow_uid` = '{uid}'"))


def _step_run(uri: str, uid: str, step: str) -> Any:
    return next(r for r in _step_runs(uri, uid) if r.data.tags.get("gangway.step") == step)


@pytest.fixture(scope="module")
def two_runs(reference_runs: ReferenceRuns) -> tuple[Path, Run, Run, str]:
    """The suite's reference runs: the pipeline twice on the same data, one MLflow store."""
    first, second = reference_runs.first, reference_runs.second
    return (
        reference_runs.state,
        Run(first.name, first.uid),
        Run(second.name, second.uid),
        reference_runs.tracking_uri,
    )


@pytest.mark.e2e
def test_pipeline_records_one_run_per_step_and_links_them(
    two_runs: tuple[Path, Run, Run, str],
) -> None:
    state, first, _, uri = two_runs
    runs = _step_runs(uri, first.uid)
    kinds = Counter(r.data.tags["gangway.kind"] for r in runs)
    assert kinds == Counter({"workflow": 1, "step": 6})
    parent = next(r for r in runs if r.data.tags["gangway.kind"] == "workflow")
    steps = [r for r in runs if r.data.tags["gangway.kind"] == "step"]
    assert Counter(r.data.tags["gangway.step"] for r in steps) == STEPS
    assert {r.data.tags["mlflow.parentRunId"] for r in steps} == {parent.info.run_id}
    assert all(r.info.status == "FINISHED" for r in steps)
    tags = parent.data.tags
    assert tags["gangway.cluster"] == "local" and len(tags["gangway.git_sha"]) >= 40
    assert tags["gangway.namespace"] == "local" and tags["gangway.image"]
    assert parent.data.params["train-steps"] == "20"
    # The Argo UI's workflow link (as Argo fills it in) lists exactly this workflow's runs.
    exp = parent.info.experiment_id
    ui = "https://mlflow.lab.example"  # the links name the UI; the runs are in the store
    link = argo_process_url(controller_links(ui)[0]["url"], _workflow(first.uid, exp))
    path, query = link.split("#", 1)[1].split("?searchFilter=")
    assert path == f"/experiments/{exp}/runs"
    found = _client(uri).search_runs([exp], unquote(query))
    assert {r.info.run_id for r in found} == {r.info.run_id for r in runs}
    # Every container step outputs a link to its own run: the search for the step's record
    # key (steps only spool, so the link is made before the run exists). A sqlite store has
    # no UI to link to, so the output is the search itself (with a server: the UI's page of
    # the experiment searched, tests/e2e/pipeline/test_tracking.py).
    urls = sorted((state / "runs" / first.name / "steps").glob("*/attempt-*/out/mlflow_run_url"))
    assert len(urls) == 5
    by_id = {r.info.run_id: r for r in steps}
    for url in urls:
        query = url.read_text()
        assert query.startswith("tags.`gangway.record` = ")
        hits = _client(uri).search_runs([exp], query)
        assert len(hits) == 1 and hits[0].info.run_id in by_id, url


@pytest.mark.e2e
def test_lineage_walks_from_a_model_version_both_ways(two_runs: tuple[Path, Run, Run, str]) -> None:
    _, first, _, uri = two_runs
    evaluate = _step_run(uri, first.uid, "evaluate")
    version = evaluate.data.tags["gangway.registered"]
    doc = _lineage(uri, f"model:{version}")
    assert doc["root"] == f"model:{version}"
    # upstream: model version ← checkpoint ← training run ← dataset ← staging run
    assert _path(doc["upstream"], ["checkpoint", "run", "dataset", "run"])
    nodes = doc["nodes"]
    ck = next(i for i in _ids(doc["upstream"]) if i.startswith("checkpoint:"))
    assert nodes[ck]["step"] == 20 and nodes[ck]["digest"].startswith("sha256:")
    trainer = next(c["id"] for c in doc["upstream"]["children"][0]["children"])
    assert nodes[trainer]["step"] == "train"
    # downstream: both inference shards and their outputs
    infers = [  # this run's: the cached re-run's inference used the same version
        c
        for c in doc["downstream"]["children"]
        if nodes[c["id"]].get("step") == "infer" and nodes[c["id"]].get("workflow_uid") == first.uid
    ]
    assert len(infers) == 2
    outputs = {o["id"] for c in infers for o in c.get("children", [])}
    assert all(o.startswith("output:") and o.endswith(".jsonl") for o in outputs)
    assert len(outputs) == 2
    # the text view says the same, readably
    res = gangway("lineage", f"model:{version}", "--tracking-uri", uri)
    assert res.returncode == 0 and "upstream" in res.stdout and "checkpoint step 20" in res.stdout


@pytest.mark.e2e
def test_two_runs_on_the_same_data_share_the_dataset_node(
    two_runs: tuple[Path, Run, Run, str],
) -> None:
    _, first, second, uri = two_runs
    stage = _step_run(uri, first.uid, "stage")
    digest = stage.data.tags["gangway.dataset_digest"]
    doc = _lineage(uri, f"dataset:{digest[:20]}")
    nodes = doc["nodes"]
    trainers = {
        nodes[i]["workflow"]
        for i in _ids(doc["downstream"])
        if i.startswith("run:") and nodes[i].get("step") == "train"
    }
    assert trainers == {first.name, second.name}
    stagers = {nodes[i]["workflow"] for i in _ids(doc["upstream"]) if i.startswith("run:")}
    assert stagers == {first.name}  # the second run's staging was a cache hit: not run again
    # and the workflow view walks from the workflow to the outputs
    _assert_complete(_lineage(uri, f"workflow:{first.name}"), first.uid)


@pytest.mark.e2e
def test_mlflow_outage_mid_run_ends_complete_without_duplicates(
    mlflow_server: str, tmp_path: Path
) -> None:
    """MLflow goes away once staging is recorded and comes back once training is done, so
    evaluation sends what was spooled; it goes away again for inference and the end of the
    run. The run still succeeds (exit 75) and says what to sync; the sync then closes the
    parent run; nothing is lost or doubled. (The outage is a proxy in front of the suite's
    server closing and opening again: what a client sees of a server that went away.)"""
    host, port = mlflow_server.removeprefix("http://").split(":")
    proxy = LoopbackProxy((host, int(port)))
    uri = proxy.url
    before = len(_client(mlflow_server).search_model_versions("name = 'train-eval-infer'"))
    state = tmp_path / "state"
    env = {**os.environ, "COLUMNS": "200", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    small = ["-p", "train-steps=20", "-p", "checkpoint-every=10", "-p", "shards=1"]
    proc = subprocess.Popen(
        [
            *GANGWAY,
            "run",
            PIPELINE,
            *small,
            "-p",
            f"mlflow-tracking-uri={uri}",
            "--state-dir",
            str(state),
        ],
        stdout=(tmp_path / "run.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=env,
    )
    try:
        spool = _wait_for(lambda: _spool_with(state, "stage", synced=True), proc)
        proxy.down()
        _wait_for(lambda: _spool_with(state, "train", synced=False, finished=True), proc)
        assert not list(spool.glob("*-train-*.json.synced")), "train was sent while MLflow was down"
        proxy.up()
        _wait_for(lambda: _spool_with(state, "evaluate", synced=True), proc)
        proxy.down()
        proc.wait(timeout=900)
        out = (tmp_path / "run.log").read_text()
        # The work succeeded, its lineage did not reach MLflow: loud, exit 75, the command.
        assert proc.returncode == 75, out[-3000:]
        assert "Succeeded" in out and "Traceback" not in out
        assert "error: lineage not recorded" in out, out[-3000:]
        assert f"gangway lineage sync --spool file://{state}/storage/runs/" in out
        logs = [p.read_text() for p in state.glob("runs/*/logs/**/*.log")]
        assert logs and not any("MLflow" in text for text in logs)  # steps only spool
        uid = spool.parent.name
        # The workflow's end always waits; inference may have been sent before the server
        # went down (it starts right after evaluation), so count what is pending.
        pending = Spool(f"file://{spool}").pending(uri)  # a record rewritten since: again
        assert any(r.kind == "workflow" for r in pending), pending
        proxy.up()
        res = gangway("lineage", "sync", "--spool", str(spool), "--tracking-uri", uri)
        assert res.returncode == 0, res.stderr
        assert f"sent {len(pending)} record(s)" in res.stdout, res.stdout
        runs = _step_runs(uri, uid)
        steps = [r for r in runs if r.data.tags["gangway.kind"] == "step"]
        assert Counter(r.data.tags["gangway.step"] for r in steps) == ONE_SHARD
        (parent,) = [r for r in runs if r.data.tags["gangway.kind"] == "workflow"]
        assert parent.info.status == "FINISHED" and parent.data.tags["gangway.phase"] == "Succeeded"
        train = next(r for r in steps if r.data.tags["gangway.step"] == "train")
        client = _client(uri)
        history = [(m.step, m.value) for m in client.get_metric_history(train.info.run_id, "loss")]
        assert [s for s, _ in history] == [10, 20]
        # Replaying everything again (markers gone) changes nothing.
        for mark in spool.glob("*.synced"):
            mark.unlink()
        res = gangway(
            "lineage", "sync", "--spool", f"file://{state}/storage", "--tracking-uri", uri
        )
        assert res.returncode == 0, res.stderr
        assert "sent 6 record(s)" in res.stdout and "0 still pending" in res.stdout
        again = _step_runs(uri, uid)
        assert sorted(r.info.run_id for r in again) == sorted(r.info.run_id for r in runs)
        history2 = client.get_metric_history(train.info.run_id, "loss")
        assert len(history2) == len(history)
        versions = client.search_model_versions("name = 'train-eval-infer'")
        assert len(versions) == before + 1  # this run's best, registered once
        _assert_complete(_lineage(uri, f"workflow:{uid}"), uid, ONE_SHARD)
    finally:
        if proc.poll() is None:
            proc.kill()
        proxy.down()


@pytest.mark.e2e
def test_sync_into_another_store_sends_everything_and_registers_the_model(
    two_runs: tuple[Path, Run, Run, str], tmp_path: Path
) -> None:
    """A spool synced to one store is sent whole to another (what a store has is tracked per
    store), and registering a model version works from the CLI too (MLflow resolves the
    ``models:/`` source through the process-wide URI, which sync points at the target)."""
    state, first, _, _ = two_runs
    spool = f"file://{state}/storage/runs/{first.uid}/lineage"
    other = f"sqlite:///{tmp_path}/other.db"
    env_free = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    into = ["lineage", "sync", "--spool", spool, "--tracking-uri", other]
    res = gangway(*into, cwd=tmp_path, env=env_free)  # not the spool's own store: asked for
    assert res.returncode == 1 and "--other-store" in res.stderr, res.stdout + res.stderr
    res = gangway(*into, "--other-store", cwd=tmp_path, env=env_free)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sent 7 record(s)" in res.stdout and "0 still pending" in res.stdout
    versions = _client(other).search_model_versions("name = 'train-eval-infer'")
    assert len(versions) == 1
    _assert_complete(_lineage(other, f"workflow:{first.uid}"), first.uid)


def _spool_with(state: Path, step: str, *, synced: bool, finished: bool = False) -> Path | None:
    for rec in (state / "storage" / "runs").glob(f"*/lineage/*-{step}-*.json"):
        if synced and not rec.with_name(rec.name + ".synced").exists():
            continue
        if finished and json.loads(rec.read_text())["status"] != "FINISHED":
            continue
        return rec.parent
    return None


def _wait_for(probe: Any, proc: subprocess.Popen[str], timeout: float = 600) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return Path(found)
        if proc.poll() is not None:
            raise AssertionError(f"the pipeline ended too early (exit {proc.returncode})")
        time.sleep(0.2)
    raise AssertionError("timed out waiting for the pipeline")


@pytest.mark.e2e
def test_last_checkpoint_times_come_from_lineage(two_runs: tuple[Path, Run, Run, str]) -> None:
    """What preemption would cost a running gang is the GPU time since its newest checkpoint:
    Gangway reads when that was from the workflow's lineage."""
    from datetime import UTC, datetime, timedelta

    from mlflow.tracking import MlflowClient

    from gangway.lineage.checkpoints import last_checkpoints

    _, first, second, uri = two_runs
    client = MlflowClient(tracking_uri=uri)
    marks = last_checkpoints(client, [first.name, second.name, "nope"])
    assert set(marks) == {first.name, second.name}
    assert datetime.now(UTC) - timedelta(hours=2) < marks[first.name] <= datetime.now(UTC)
    assert last_checkpoints(MlflowClient(tracking_uri=uri), []) == {}
