"""Evaluation: every checkpoint scored on the same validation windows; the best is chosen."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from components import checkpoints
from components.evaluation import evaluate
from gangway import storage
from gangway.errors import PermanentError
from tests.helpers import run_module


def test_scores_every_checkpoint_and_picks_lowest_loss(corpus_uri: str, trained: str) -> None:
    uris = [c.uri for c in checkpoints.complete(trained)]
    m = evaluate(corpus_uri, uris, max_tokens=8192)
    steps = [r["step"] for r in m["checkpoints"]]
    assert steps == [10, 20, 30]
    losses = [r["loss"] for r in m["checkpoints"]]
    assert losses[-1] < losses[0], "training should lower validation loss"
    assert m["best"]["loss"] == min(losses)
    assert all(
        math.isclose(r["perplexity"], math.exp(r["loss"]), rel_tol=1e-4) for r in m["checkpoints"]
    )
    assert all(r["tokens"] == m["checkpoints"][0]["tokens"] for r in m["checkpoints"])
    assert m["dataset_digest"] == m["best"]["trained_on"]


def test_cli_writes_metrics_and_best(corpus_uri: str, trained: str, tmp_path: Path) -> None:
    res = run_module(
        "components.evaluation",
        "--data",
        corpus_uri,
        "--checkpoints",
        trained,
        "--max-tokens",
        "4096",
        "--metrics-out",
        f"file://{tmp_path}/m.json",
        "--best-out",
        str(tmp_path / "best.txt"),
    )
    assert res.returncode == 0, res.stderr
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert (tmp_path / "best.txt").read_text() == metrics["best"]["uri"]
    assert len(metrics["checkpoints"]) == 3


def test_incomplete_checkpoint_is_refused(corpus_uri: str, tmp_path: Path) -> None:
    partial = f"file://{tmp_path}/ck/step-00000005"
    storage.write_bytes(storage.join(partial, "__0_0.distcp"), b"half")
    with pytest.raises(PermanentError, match=r"none of the 1 checkpoint.*no complete checkpoint"):
        evaluate(corpus_uri, [partial])


def test_no_checkpoints_is_a_clear_error(corpus_uri: str, tmp_path: Path) -> None:
    res = run_module(
        "components.evaluation", "--data", corpus_uri, "--checkpoints", f"file://{tmp_path}/empty"
    )
    assert res.returncode == 1
    assert "no complete checkpoints" in res.stderr and "Traceback" not in res.stderr
