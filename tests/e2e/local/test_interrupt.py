"""Ctrl-C on a real `gangway run` during training: every process of the run stops (training
saves a checkpoint first), the summary is printed, the MLflow runs are closed as KILLED, the exit
code is 130 — and `gangway retry` resumes the same workflow (same uid) from that checkpoint,
without running the steps that had succeeded."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from gangway.lineage import sqlite_uri
from tests.helpers import GANGWAY, REPO, gangway

PIPELINE = "pipelines/train_eval_infer.py"
STEPS = 40


def _trained_steps(state: Path) -> list[int]:
    steps = []
    for log in state.glob("runs/*/logs/train/*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith('{"step"'):
                steps.append(json.loads(line)["step"])
    return steps


def _processes_of(uid: str, state: Path) -> list[str]:
    """Live processes that belong to the run: its uid in their environment or its state
    directory on their command line."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            env = (proc / "environ").read_bytes()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"GANGWAY_WORKFLOW_UID={uid}".encode() in env or str(state).encode() in cmd:
            found.append(f"{proc.name}: {cmd.decode(errors='replace')[:200]}")
    return found


def _runs(store: Path) -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("train-eval-infer")
    assert exp is not None
    return list(client.search_runs([exp.experiment_id]))


@pytest.mark.e2e
def test_ctrl_c_stops_everything_closes_the_books_and_retry_resumes(tmp_path: Path) -> None:
    project = tmp_path / "my project"  # a space: the printed hints must still paste into a shell
    project.mkdir()
    state = project / ".gangway"
    cmd = [
        *GANGWAY,
        "run",
        str(REPO / PIPELINE),
        "-p",
        f"train-steps={STEPS}",
        "-p",
        "checkpoint-every=30",
        "-p",
        "log-every=5",
        "-p",
        "shards=1",
    ]
    log = (tmp_path / "run.log").open("w")
    env = {**os.environ, "COLUMNS": "160"}
    proc = subprocess.Popen(cmd, cwd=project, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 300
        while not any(s >= 10 for s in _trained_steps(state)):
            assert proc.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=120)
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = (tmp_path / "run.log").read_text()
    assert rc == 130, out[-3000:]
    assert "Traceback" not in out
    assert "Interrupted (SIGINT)" in out and "stopped: interrupted (SIGINT)" in out
    assert "not run: interrupted (SIGINT)" in out  # evaluate and infer, in the summary
    (run_file,) = state.glob("runs/*/run.json")
    saved = json.loads(run_file.read_text())
    name, uid = saved["workflow"]["metadata"]["name"], saved["workflow"]["metadata"]["uid"]
    assert f"resume with: gangway retry {name} --state-dir {shlex.quote(str(state))}" in out
    store = state / "mlflow.db"
    assert f"mlflow ui --backend-store-uri {sqlite_uri(store)}" in out
    # Nothing of the run survives it (the gang's torchrun workers included).
    time.sleep(0.5)
    assert _processes_of(uid, state) == [], "processes of the run survived"
    # Training saved where it stopped, and the books are closed.
    saved_ck = sorted(state.glob(f"storage/runs/{uid}/checkpoints/train/step-*/_manifest.json"))
    assert saved_ck, "training saved no checkpoint on SIGTERM"
    stopped_at = int(saved_ck[-1].parent.name.split("-")[1])
    assert 10 <= stopped_at < STEPS
    runs = _runs(store)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    parent = next(r for r in runs if r.data.tags["gangway.kind"] == "workflow")
    assert parent.info.status == "KILLED"
    train = [r for r in runs if r.data.tags.get("gangway.step") == "train"]
    assert [r.info.status for r in train] == ["KILLED"]

    res = gangway("retry", cwd=project)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # stage-cache (staging's cache check), stage and split succeeded before the interrupt
    assert f"retrying {name} (uid {uid}): 3 step(s) succeeded before" in res.stdout
    assert f"run:     file://{state}/storage/runs/{uid}" in res.stdout
    resumed = [
        json.loads(line)
        for lg in state.glob(f"runs/{name}/logs/train/*.log")
        for line in lg.read_text(errors="replace").splitlines()
        if '"event": "resumed"' in line
    ]
    assert [r["step"] for r in resumed] == [stopped_at]
    runs = _runs(store)
    by_step: dict[str, list[str]] = {}
    for r in runs:
        by_step.setdefault(r.data.tags.get("gangway.step", "workflow"), []).append(r.info.status)
    assert by_step["stage"] == ["FINISHED"] and by_step["split"] == ["FINISHED"]  # not re-run
    assert sorted(by_step["train"]) == ["FINISHED", "KILLED"]
    assert [r.info.status for r in runs if r.data.tags["gangway.kind"] == "workflow"] == [
        "FINISHED"
    ]
    again = gangway("retry", cwd=project)
    assert again.returncode == 1 and "nothing to retry" in again.stderr
    # Beside a local run, `gangway lineage` finds its store by itself.
    lineage = gangway("lineage", f"workflow:{name}", cwd=project)
    assert lineage.returncode == 0, lineage.stderr
    assert "run train [KILLED]" in lineage.stdout and "run train [FINISHED]" in lineage.stdout
    print(f"stopped {stopped_in:.1f}s after SIGINT, at step {stopped_at}")
