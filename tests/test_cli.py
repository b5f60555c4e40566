"""The ``gangway`` command line as a user meets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangway import storage
from tests.conftest import REPO

GANGWAY = [sys.executable, "-c", "from gangway.cli import main; main()"]


def gangway(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GANGWAY, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": "120"},
    )


def test_help_explains_the_commands() -> None:
    res = gangway("--help")
    assert res.returncode == 0
    for word in ("demo", "ls", "version", "Argo"):
        assert word in res.stdout


def test_ls_shows_objects_and_publish_state(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("hello")
    storage.publish_dir(tmp_path / "src", f"file://{tmp_path}/pub")
    res = gangway("ls", f"file://{tmp_path}/pub")
    assert res.returncode == 0, res.stderr
    assert "a.txt" in res.stdout and "published, digest sha256:" in res.stdout


def test_user_error_is_one_line_not_a_traceback() -> None:
    res = gangway("ls", "ftp://nowhere/x")
    assert res.returncode == 1
    assert "unsupported scheme" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.e2e
def test_demo_runs_the_spine_end_to_end(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    res = gangway(
        "demo",
        "--state-dir",
        str(state),
        "--steps",
        "20",
        "--checkpoint-every",
        "10",
        "--shards",
        "2",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    metrics = json.loads((state / "eval" / "metrics.json").read_text())
    assert [c["step"] for c in metrics["checkpoints"]] == [10, 20]
    assert metrics["checkpoints"][1]["loss"] < metrics["checkpoints"][0]["loss"]
    preds = sorted((state / "predictions").glob("shard-*.jsonl"))
    assert len(preds) == 2
    ids = [json.loads(line)["id"] for p in preds for line in p.read_text().splitlines()]
    inputs = (state / "inputs" / "docs.jsonl").read_text().splitlines()
    assert sorted(ids) == sorted(json.loads(x)["id"] for x in inputs)
    assert "succeeded" in res.stdout and "predictions: file://" in res.stdout
    # Re-running converges without redoing work.
    again = gangway(
        "demo",
        "--state-dir",
        str(state),
        "--steps",
        "20",
        "--checkpoint-every",
        "10",
        "--shards",
        "2",
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skipped (already written)" in again.stdout
