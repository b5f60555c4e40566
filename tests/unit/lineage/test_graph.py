"""The lineage graph, its walks and the spool, as pure functions over snapshots and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangway.errors import GangwayError
from gangway.lineage.graph import (
    CheckpointSnap,
    RunSnap,
    Snapshot,
    VersionSnap,
    build_graph,
    walk,
)
from gangway.lineage.query import resolve
from gangway.lineage.records import StepRecord, WorkflowInfo
from gangway.lineage.render import text_lines, to_json
from gangway.lineage.spool import Spool, find_spools
from tests.helpers import gangway

DIGEST = "sha256:" + "ab" * 32


def _run(run_id: str, step: str, uid: str = "u1", **tags: str) -> RunSnap:
    return RunSnap(
        run_id=run_id,
        experiment_id="1",
        status="FINISHED",
        start_ms=int(run_id[-1]) if run_id[-1].isdigit() else 0,
        tags={
            "gangway.kind": "step",
            "gangway.step": step,
            "gangway.workflow": f"wf-{uid}",
            "gangway.workflow_uid": uid,
            **tags,
        },
        datasets=[("corpus", DIGEST[7:39], "s3://b/corpora/x")] if step != "infer" else [],
    )


def _snapshot() -> Snapshot:
    parent = RunSnap(
        "p1",
        "1",
        "FINISHED",
        0,
        {"gangway.kind": "workflow", "gangway.workflow": "wf-u1", "gangway.workflow_uid": "u1"},
    )
    runs = [
        parent,
        _run("r1", "stage", **{"gangway.dataset_out": DIGEST}),
        _run("r2", "train"),
        _run("r3", "evaluate", **{"gangway.checkpoints_in": json.dumps(["m-1", "m-2"])}),
        _run(
            "r4",
            "infer",
            **{
                "gangway.model_version": "m/1",
                "gangway.checkpoints_in": json.dumps(["m-2"]),
                "gangway.outputs": json.dumps(["s3://b/pred/0.jsonl"]),
            },
        ),
        _run("r5", "train", uid="u2"),
    ]
    cks = [
        CheckpointSnap(
            "m-1",
            "1",
            {
                "gangway.checkpoint_uri": "s3://b/c/1",
                "gangway.checkpoint_step": "10",
                "gangway.training_run": "r2",
            },
        ),
        CheckpointSnap(
            "m-2",
            "1",
            {"gangway.checkpoint_uri": "s3://b/c/2", "gangway.checkpoint_step": "20"},
            source_run_id="r2",
        ),
    ]
    versions = [VersionSnap("m", "1", "models:/m-2", "r3", {"gangway.record": "k"})]
    return Snapshot(runs, cks, versions)


def _ids(tree: object) -> list[str]:
    d = tree.to_json() if hasattr(tree, "to_json") else tree
    assert isinstance(d, dict)
    return [d["id"], *(i for c in d.get("children", []) for i in _ids(c))]


def test_model_version_walks_up_to_data_and_down_to_outputs() -> None:
    g = build_graph(_snapshot())
    up = walk(g, "model:m/1", "up")
    assert _ids(up) == [
        "model:m/1",
        "checkpoint:m-2",
        "run:r2",
        f"dataset:{DIGEST[7:39]}",
        "run:r1",
    ]
    assert g.nodes["model:m/1"]["registered_by"] == "run:r3"  # the evaluation that chose it
    down = walk(g, "model:m/1", "down")
    assert _ids(down) == ["model:m/1", "run:r4", "output:s3://b/pred/0.jsonl"]


def test_a_dataset_feeds_every_workflow_that_used_it_and_repeats_are_marked() -> None:
    g = build_graph(_snapshot())
    down = walk(g, f"dataset:{DIGEST[7:39]}", "down")
    ids = _ids(down)
    assert {"run:r2", "run:r5", "run:r3"} <= set(ids)  # two workflows' training, one eval
    assert "run:r1" not in ids  # staging produced it: it is upstream
    assert ids.count("run:r3") == 3  # under the dataset and both checkpoints
    flat = json.dumps(down.to_json())
    assert flat.count('"repeated": true') >= 2


def test_workflow_view_starts_at_its_entry_steps() -> None:
    g, root = resolve(build_graph(_snapshot()), "workflow:wf-u1")
    assert root == "workflow:u1"
    down = walk(g, root, "down")
    assert [c.id for c in down.children] == ["run:r1"]  # stage: fed by nothing it made
    assert "output:s3://b/pred/0.jsonl" in _ids(down)
    lines = text_lines(g, root, walk(g, root, "up"), down)
    assert lines[0].startswith("workflow wf-u1") and "    (nothing recorded)" in lines
    doc = to_json(g, root, walk(g, root, "up"), down)
    assert doc["nodes"]["run:r4"]["step"] == "infer"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("r2", "model:NAME/VERSION, run:ID"),
        ("model:m", "give the version"),
        ("model:m/9", "no model version"),
        ("run:nope", "no Gangway run"),
        ("workflow:other", "no workflow"),
        ("dataset:ffff", "no dataset"),
    ],
)
def test_bad_references_say_what_to_give(ref: str, message: str) -> None:
    with pytest.raises(GangwayError, match=message):
        resolve(build_graph(_snapshot()), ref)


def test_a_dataset_prefix_and_the_full_digest_both_resolve() -> None:
    g = build_graph(_snapshot())
    assert resolve(g, "dataset:abab")[1] == resolve(g, f"dataset:{DIGEST}")[1]


def _record(step: str, start: int, status: str = "RUNNING") -> StepRecord:
    return StepRecord(
        workflow=WorkflowInfo(uid="u1"),
        step=step,
        status=status,
        start_ms=start,
    )


def test_spool_replays_changed_records_and_closes_killed_attempts(tmp_path: Path) -> None:
    spool = Spool(f"file://{tmp_path}/runs/u1/lineage")
    killed, retry, done = _record("train", 1), _record("train", 2), _record("stage", 0, "FINISHED")
    for r in (killed, retry, done):
        spool.write(r)
    spool.mark_synced(done)
    pending = spool.pending()
    assert [r.key for r in pending] == [killed.key, retry.key]
    assert pending[0].status == "KILLED" and pending[1].status == "RUNNING"
    spool.mark_synced(pending[0])
    retry.status = "FINISHED"
    spool.write(retry)  # a new revision is pending again until synced
    assert [r.key for r in spool.pending()] == [retry.key]
    assert spool.close_running() == 0
    (tmp_path / "runs" / "u1" / "lineage" / "junk.json").write_text("{not json")
    assert [r.key for r in spool.pending()] == [retry.key]  # unreadable records are skipped
    assert find_spools(f"file://{tmp_path}") == [f"file://{tmp_path}/runs/u1/lineage"]


def test_lineage_cli_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    res = gangway("lineage", "sync", "--tracking-uri", uri)
    assert res.returncode == 1 and "sync needs --spool" in res.stderr
    res = gangway("lineage", "sync", "--spool", f"file://{tmp_path}/none", "--tracking-uri", uri)
    assert res.returncode == 1 and "no lineage records under" in res.stderr
    res = gangway("lineage", "model:x/1", "--state-dir", str(tmp_path / "empty"))
    assert res.returncode == 1 and "no tracking store: none in " in res.stderr
    res = gangway("lineage", "thing", "--tracking-uri", uri)
    assert res.returncode == 1 and "say what to look up as model:NAME/VERSION" in res.stderr
    assert "Traceback" not in res.stderr
