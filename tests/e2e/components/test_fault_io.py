"""Fault injection on staging and batch inference (R2, R3) with real processes and signals,
and a permanent error that fails fast after one attempt."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangway import storage
from tests.helpers import REPO, run_module
from tests.helpers.servers import make_bucket


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def s3_source(demo_dataset: str, s3_endpoint: str, tmp_path: Path) -> str:
    """The demo dataset published on the S3 server."""
    local = tmp_path / "src"
    storage.fetch_dir(demo_dataset, local)
    source = f"s3://{make_bucket(s3_endpoint)}/datasets/stdlib"
    storage.publish_dir(local, source)
    return source


@pytest.mark.e2e
def test_r2_staging_killed_mid_transfer_resumes(s3_source: str, tmp_path: Path) -> None:
    source = s3_source
    total = len(storage.read_manifest(source).files)  # type: ignore[union-attr]
    work = tmp_path / "w"
    killed_at = 0
    for _ in range(20):  # retry until the kill lands mid-transfer
        proc = _start(
            "components.staging",
            "stage",
            "--source",
            source,
            "--workdir",
            str(work),
            "--workers",
            "2",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            have = sum(1 for p in (work / "raw").rglob("*.py")) if (work / "raw").exists() else 0
            if have >= max(3, killed_at + 3):
                proc.send_signal(signal.SIGKILL)
                break
            if proc.poll() is not None:
                break
            time.sleep(0.005)
        proc.wait()
        copied = sum(1 for p in (work / "raw").rglob("*.py"))
        if proc.returncode == -signal.SIGKILL and 0 < copied < total:
            killed_at = copied
            break
    assert 0 < killed_at < total, "could not interrupt staging mid-transfer"
    res = run_module("components.staging", "stage", "--source", source, "--workdir", str(work))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["files_skipped"] >= killed_at - 2  # files complete before the kill are kept
    assert out["files_copied"] + out["files_skipped"] == total
    fresh = run_module(
        "components.staging", "stage", "--source", source, "--workdir", str(tmp_path / "fresh")
    )
    assert json.loads(fresh.stdout.strip().splitlines()[-1])["digest"] == out["digest"]


def test_r2_corrupt_stored_object_is_refused(s3_source: str, tmp_path: Path) -> None:
    source = s3_source
    manifest = storage.read_manifest(source)
    assert manifest is not None
    victim = sorted(manifest.files)[5]
    storage.write_bytes(storage.join(source, victim), b"# flipped bits\n")
    res = run_module(
        "components.staging", "stage", "--source", source, "--workdir", str(tmp_path / "w")
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert victim in res.stderr and "corrupt" in res.stderr
    assert not (tmp_path / "w" / "raw" / victim).exists()
    assert not (tmp_path / "w" / "corpus").exists()


@pytest.mark.e2e
def test_r3_inference_killed_mid_shard_writes_exactly_once(
    demo_dataset: str, trained: str, tmp_path: Path
) -> None:
    from components import checkpoints

    best = checkpoints.latest(trained)
    assert best is not None
    # A shard long enough (8x the demo inputs: seconds of generation) that the kill lands
    # while it is being processed.
    docs = storage.read_bytes(demo_dataset.rsplit("/", 1)[0] + "/docs.jsonl").decode().splitlines()
    rows_in = [
        json.dumps({**json.loads(d), "id": f"{i}-{json.loads(d)['id']}"})
        for i in range(8)
        for d in docs
    ]
    inputs = f"file://{tmp_path}/in.jsonl"
    storage.write_bytes(inputs, ("\n".join(rows_in) + "\n").encode())
    out = f"file://{tmp_path}/out/shard-00000.jsonl"
    args = (
        "components.inference",
        "run",
        "--checkpoint",
        best.uri,
        "--input",
        inputs,
        "--output",
        out,
        "--max-new-tokens",
        "64",
    )
    proc = _start(*args)
    assert proc.stderr is not None
    said = ""  # the line printed once the model is loaded: documents are in progress
    while "model loaded" not in said and (line := proc.stderr.readline()):
        said += line
    assert "model loaded" in said, said + proc.stderr.read()
    assert proc.poll() is None, "the shard finished before the kill; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not storage.exists(out), "a killed shard must leave no (partial) output"
    res = run_module(*args)
    assert res.returncode == 0, res.stderr
    again = run_module(*args)
    assert json.loads(again.stdout.strip().splitlines()[-1])["skipped"] is True
    rows = [json.loads(x) for x in storage.read_bytes(out).decode().splitlines()]
    ids = [r["id"] for r in rows]
    expected = [json.loads(x)["id"] for x in storage.read_bytes(inputs).decode().splitlines()]
    assert ids == expected  # every document exactly once, in order


@pytest.mark.e2e
def test_permanent_error_fails_fast_after_one_attempt(tmp_path: Path) -> None:
    from gangway.local import Clock, LocalExecutor, workflow_from_template
    from gangway.workflows.compiler import compile_pipeline

    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    wf = workflow_from_template(
        wt,
        {"model": "huge", "mlflow-tracking-uri": "", "storage-root": f"file://{tmp_path}/storage"},
    )
    slept: list[float] = []
    res = LocalExecutor(wf, tmp_path, clock=Clock(sleep=slept.append)).run()
    train = next(n for n in res.nodes if n.task == "train")
    assert res.phase == "Failed" and train.phase == "Failed"
    assert train.attempts == 1 and slept == []
    assert "Aborted" in train.message and "restart" not in train.message
    assert "--config 'huge': no such file and not a preset" in train.message
