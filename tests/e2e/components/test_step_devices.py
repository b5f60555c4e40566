"""Evaluation and inference run on the step's device, batched: the device is chosen as training
chooses it (and refused the same way when a GPU pod sees no GPU), and batching documents changes
no result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from components import checkpoints
from components.devices import step_device
from components.evaluation import evaluate
from components.inference import infer_shard
from gangway import storage
from gangway.contract import ENV_GPUS, EXIT_PERMANENT
from gangway.errors import PermanentError
from tests.helpers import run_module


@pytest.fixture(scope="module")
def best(trained: str) -> str:
    last = checkpoints.latest(trained)
    assert last is not None
    return last.uri


def test_the_device_is_the_cpu_here_unless_the_pod_asked_for_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_GPUS, raising=False)
    assert step_device().type == "cpu"
    monkeypatch.setenv(ENV_GPUS, "0")
    assert step_device().type == "cpu"
    monkeypatch.setenv(ENV_GPUS, "2")
    with pytest.raises(PermanentError, match=r"requested 2 GPU\(s\) but CUDA sees 0"):
        step_device()
    for bad in ("two", "-1"):
        monkeypatch.setenv(ENV_GPUS, bad)
        with pytest.raises(PermanentError, match=ENV_GPUS):
            step_device()


def test_evaluation_reports_its_device(corpus_uri: str, trained: str) -> None:
    uris = [c.uri for c in checkpoints.complete(trained)][:1]
    doc = evaluate(corpus_uri, uris, max_tokens=4096, batch_size=4)
    assert doc["checkpoints"][0]["device"] == "cpu"
    again = evaluate(corpus_uri, uris, max_tokens=4096, batch_size=32)
    assert again["checkpoints"][0]["loss"] == pytest.approx(doc["checkpoints"][0]["loss"], 1e-5)


def test_batched_inference_gives_what_one_document_at_a_time_gives(
    best: str, tmp_path: Path
) -> None:
    texts = ["short", "x", "a longer document " * 40, "another one " * 7, "ünïcode " * 30]
    src = f"file://{tmp_path}/in.jsonl"
    storage.write_bytes(src, "".join(json.dumps({"text": t}) + "\n" for t in texts).encode())
    rows = {}
    for batch in (1, 3, 64):
        out = f"file://{tmp_path}/out-{batch}.jsonl"
        result = infer_shard(best, src, out, max_new_tokens=8, batch_size=batch)
        assert result["device"] == "cpu" and result["documents"] == len(texts)
        rows[batch] = [json.loads(line) for line in storage.read_bytes(out).splitlines()]
    for batched in (rows[3], rows[64]):
        for one, many in zip(rows[1], batched, strict=True):
            assert one["id"] == many["id"] and one["continuation"] == many["continuation"]
            assert ("loss" in one) == ("loss" in many) == (one["bytes"] >= 2)
            if "loss" in one:
                assert many["loss"] == pytest.approx(one["loss"], abs=1e-5)


@pytest.mark.parametrize("step", ["evaluation", "inference"])
def test_a_gpu_pod_that_sees_no_gpu_refuses_to_evaluate_or_infer(
    step: str, corpus_uri: str, best: str, tmp_path: Path
) -> None:
    if step == "evaluation":
        args = ["components.evaluation", "--data", corpus_uri, "--checkpoint", best]
    else:
        src = f"file://{tmp_path}/in.jsonl"
        storage.write_bytes(src, b'{"text": "hello there"}\n')
        args = ["components.inference", "run", "--checkpoint", best, "--input", src]
        args += ["--output", f"file://{tmp_path}/out.jsonl"]
    res = run_module(
        *args, env={ENV_GPUS: "1", "CUDA_VISIBLE_DEVICES": "", "MLFLOW_TRACKING_URI": ""}
    )
    assert res.returncode == EXIT_PERMANENT, res.stderr
    assert "this pod requested 1 GPU(s) but CUDA sees 0" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out.jsonl").exists()
    assert os.environ.get(ENV_GPUS) is None
