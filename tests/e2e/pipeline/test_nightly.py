"""Nightly evals end to end: the compiled pipeline run locally, night after night, against a
real MLflow store that a real training run filled (one model version, checkpoints at steps 10
and 20). What is due is found through lineage; a regression fails the night loudly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gangway.contract import tag
from gangway.local.session import Finished, run_pipeline
from tests.helpers import REPO, ReferenceRuns, copy_state, gangway

pytestmark = pytest.mark.e2e
NIGHTLY = REPO / "pipelines" / "nightly_eval.py"
MODEL = "train-eval-infer"


@pytest.fixture(scope="module")
def trained(
    reference_runs: ReferenceRuns, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Any]]:
    """A copy of the suite's reference state dir (one training run's version 1, checkpoints
    at steps 10 and 20), version 1 holding the alias ``production``."""
    from mlflow.tracking import MlflowClient

    state = copy_state(reference_runs, tmp_path_factory.mktemp("nightly") / "state")
    client = MlflowClient(f"sqlite:///{state}/mlflow.db")
    client.set_registered_model_alias(MODEL, "production", "1")
    yield state, client


def _night(state: Path) -> Finished:
    return run_pipeline(NIGHTLY, {}, state, parallelism=2)


def _evals(client: Any) -> list[Any]:
    exp = client.get_experiment_by_name("nightly-eval")
    return list(client.search_runs([exp.experiment_id], f"tags.`{tag('kind')}` = 'eval'"))


def _scored(done: Finished) -> list[str]:
    """The score nodes that ran (a night with nothing due shows one Skipped ``score``, as an
    empty fan-out does in Argo)."""
    return sorted(n.name for n in done.result.nodes if n.task == "score" and n.phase != "Skipped")


def _register(client: Any, checkpoint: str) -> str:
    v = client.create_model_version(MODEL, checkpoint, tags={tag("checkpoint"): checkpoint})
    return f"{MODEL}/{v.version}"


def _checkpoint(client: Any, version: str, step: int) -> str:
    best = str(client.get_model_version(MODEL, version).tags[tag("checkpoint")])
    return best.rsplit("/", 1)[0] + f"/step-{step:08d}"


def test_nights_score_only_what_is_new_and_fail_loudly_on_a_regression(
    trained: tuple[Path, Any],
) -> None:
    state, client = trained
    first = _night(state)
    assert first.result.phase == "Succeeded"
    assert len(_scored(first)) == 2 and len(_evals(client)) == 2  # version 1 on both suites
    tracking = f"sqlite:///{state}/mlflow.db"
    walked = gangway("lineage", f"model:{MODEL}/1", "--tracking-uri", tracking)
    assert walked.returncode == 0, walked.stderr
    downstream = walked.stdout.split("downstream")[1]  # the evaluations, linked to the version
    assert (
        f"heldout-perplexity · {MODEL}/1" in downstream and f"next-bytes · {MODEL}/1" in downstream
    )

    second = _night(state)  # nothing new: nothing scored, a quick success that says so
    assert second.result.phase == "Succeeded" and _scored(second) == []
    summary = next(n for n in second.result.nodes if n.task == "report").outputs["summary"]
    assert "Nothing new to score on 2 suite(s)" in summary
    assert len(_evals(client)) == 2

    worse = _register(client, _checkpoint(client, "1", 10))  # a less trained checkpoint
    res = gangway("run", str(NIGHTLY), "--state-dir", str(state))
    assert res.returncode != 0, res.stdout
    assert f"regression: {worse} on heldout-perplexity" in res.stdout + res.stderr
    evals = _evals(client)
    assert len(evals) == 4  # only the new version was scored
    assert {e.data.tags[tag("model_version")] for e in evals} == {f"{MODEL}/1", worse}
    version = client.get_model_version(MODEL, worse.rsplit("/", 1)[1])
    assert "heldout-perplexity" in version.tags["regression"]
    parent = client.search_runs(
        [client.get_experiment_by_name("nightly-eval").experiment_id],
        f"tags.`{tag('kind')}` = 'workflow'",
        order_by=["attribute.start_time DESC"],
        max_results=1,
    )[0]
    artifact = client.download_artifacts(parent.info.run_id, "nightly-eval/summary.md")
    assert f"**REGRESSION: {worse}**" in Path(artifact).read_text()

    again = _night(state)  # the same night re-run: no second evaluation, no second tag
    assert again.result.phase == "Succeeded" and _scored(again) == []
    assert len(_evals(client)) == 4


def test_a_night_killed_half_way_is_completed_by_the_next_without_duplicates(
    trained: tuple[Path, Any],
) -> None:
    """A score step killed after making its evaluation run leaves it RUNNING: the next night
    finds the version still due, finishes that same run, and makes no other."""
    from gangway.evals.discover import Pair
    from gangway.evals.store import ensure_eval
    from gangway.evals.suites import load_suites
    from gangway.lineage.ensure import ensure_experiment
    from gangway.lineage.records import WorkflowInfo

    state, client = trained
    new = _register(client, _checkpoint(client, "1", 20))
    suite = next(s for s in load_suites([REPO / "pipelines" / "suites"]) if s.name == "next-bytes")
    killed = WorkflowInfo(pipeline="nightly-eval", name="nightly-eval-killed", uid="killed-uid")
    exp = ensure_experiment(client, "nightly-eval")
    left = ensure_eval(client, exp, killed, suite, Pair(new, "x", suite.name), "corpora/x")
    assert not left.finished
    done = _night(state)
    assert done.result.phase == "Succeeded", [(n.name, n.message) for n in done.result.nodes]
    mine = [e for e in _evals(client) if e.data.tags[tag("model_version")] == new]
    assert sorted(e.data.tags[tag("eval_suite")] for e in mine) == [
        "heldout-perplexity",
        "next-bytes",
    ]
    finished = next(e for e in mine if e.data.tags[tag("eval_suite")] == "next-bytes")
    assert finished.info.run_id == left.run_id and finished.info.status == "FINISHED"
    assert finished.data.tags[tag("workflow_uid")] != "killed-uid"  # it counts for this night
    metrics = json.loads(
        next(n for n in done.result.nodes if n.name.startswith("score")).outputs["metrics"]
    )
    assert metrics


def test_a_suite_whose_data_changed_fails_its_evaluation_by_name_and_leaves_it_due(
    trained: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Scores on other data would not compare: the step refuses, naming both digests, and
    the evaluation run is FAILED — not finished, so the next night tries it again."""
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is relative to the cwd
    from components import nightly
    from gangway.errors import PermanentError
    from gangway.evals.suites import load_suites, suites_json

    state, client = trained
    suite = load_suites([REPO / "pipelines" / "suites"])[0]
    moved = suite.model_copy(
        update={"dataset": suite.dataset.model_copy(update={"digest": "sha256:" + "0" * 64})}
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{state}/mlflow.db")
    monkeypatch.setenv("GANGWAY_PIPELINE", "nightly-eval")
    monkeypatch.setenv("GANGWAY_WORKFLOW_UID", "by-hand")
    argv = ["score", "--candidate", f"{MODEL}/1", "--checkpoint", _checkpoint(client, "1", 20)]
    argv += ["--suite", suite.name, "--suites", suites_json([moved]), "--storage-root"]
    argv += [f"file://{state}/storage", "--metrics-out", str(state / "m.json")]
    with pytest.raises(
        PermanentError, match=r"the suite pins sha256:0{64}; update dataset\.digest"
    ):
        nightly.main(argv)
    failed = [e for e in _evals(client) if e.data.tags[tag("eval_suite_digest")] == moved.digest]
    assert [e.info.status for e in failed] == ["FAILED"]
