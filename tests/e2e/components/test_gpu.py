"""The GPU check: run on a machine with a CUDA GPU (``pytest -m gpu
tests/e2e/components/test_gpu.py -s``); skipped without one.

* a world-size-1 NCCL process group with DDP;
* the ``gpu`` preset trains and reports step time, tokens/s, MFU and peak memory (goal: MFU of
  at least 50 % on an H200, whose dense bf16 peak is 989 TFLOP/s);
* SIGTERM mid-training saves a checkpoint and exits 143, and a rerun resumes from it;
* a checkpoint saved from the GPU is evaluated on the GPU and on the CPU, with the same loss.

``GANGWAY_GPU_REHEARSAL=1`` runs the same flows on the CPU with a small model (gloo instead of
NCCL, no MFU), to check the test itself on a machine without a GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from components import checkpoints
from gangway.contract import EXIT_PREEMPTED
from tests.helpers import REPO

CUDA = torch.cuda.is_available()
REHEARSAL = os.environ.get("GANGWAY_GPU_REHEARSAL") == "1"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (CUDA or REHEARSAL),
        reason="needs a CUDA GPU (or GANGWAY_GPU_REHEARSAL=1 to rehearse on the CPU)",
    ),
]
SMALL = ["--set", "model.block_size=64", "--set", "model.n_embd=64", "--set", "batch_size=8"]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", **extra}
    if CUDA:
        env["GANGWAY_GPUS"] = "1"  # as a GPU pod has it: refuse rather than fall back
    return env


def _train(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "components.training", *args]
    return subprocess.Popen(
        argv, cwd=REPO, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_nccl_process_group_of_one_with_ddp() -> None:
    backend = "nccl" if CUDA else "gloo"
    script = f"""
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
device = torch.device("cuda:0" if {CUDA} else "cpu")
dist.init_process_group("{backend}", init_method="tcp://127.0.0.1:29671", rank=0, world_size=1)
model = DDP(torch.nn.Linear(64, 64).to(device), device_ids=[0] if {CUDA} else None)
loss = model(torch.randn(8, 64, device=device)).square().mean()
loss.backward()
t = torch.ones(1, device=device)
dist.all_reduce(t)
assert t.item() == 1.0 and model.module.weight.grad is not None
dist.destroy_process_group()
print("ok", dist.get_backend if False else "{backend}")
"""
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr


def test_the_gpu_preset_reports_mfu(corpus_uri: str, tmp_path: Path) -> None:
    preset = ["--config", "gpu"] if CUDA else ["--config", "small", *SMALL]
    steps = "60" if CUDA else "6"
    proc = _train(
        "--data", corpus_uri, "--checkpoints", f"file://{tmp_path}/ckpt", *preset,
        "--set", f"steps={steps}", "--set", "log_every=10" if CUDA else "log_every=2",
        "--set", "checkpoint_every=100000", "--result-out", str(tmp_path / "result.json"),
    )  # fmt: skip
    out, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err[-4000:]
    windows = [r for r in _records(out) if "loss" in r and "step" in r]
    last = windows[-1]  # the first window includes compilation
    report = {
        "device": torch.cuda.get_device_name(0) if CUDA else "cpu",
        "step_time_s": last["step_time_s"],
        "tokens_per_s": last["tokens_per_s"],
        "mfu": last.get("mfu"),
        "peak_mem_gib": last["peak_mem_gib"],
        "checkpoint_s": [r["seconds"] for r in _records(out) if r.get("event") == "checkpoint"],
        "windows": windows,
    }
    print("\nGPU preset:", json.dumps(report, indent=1))
    if os.environ.get("GANGWAY_GPU_REPORT"):
        Path(os.environ["GANGWAY_GPU_REPORT"]).write_text(json.dumps(report, indent=1))
    assert last["tokens_per_s"] > 0 and last["peak_mem_gib"] > 0
    if CUDA:
        assert last["mfu"] is not None and 0 < last["mfu"] < 1, last


def _wait_for_step(proc: subprocess.Popen[str], timeout: float) -> list[str]:
    """Lines of stdout until the first logged step."""
    assert proc.stdout is not None
    lines, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith('{"step"'):
            return lines
    raise AssertionError("no step logged: " + "".join(lines))


def test_sigterm_saves_exits_143_and_a_rerun_resumes(corpus_uri: str, tmp_path: Path) -> None:
    ckpt = f"file://{tmp_path}/ckpt"
    args = ["--data", corpus_uri, "--checkpoints", ckpt, "--config", "small", *SMALL]
    proc = _train(*args, "--set", "steps=100000", "--set", "log_every=1", "--set",
                  "checkpoint_every=100000")  # fmt: skip
    _wait_for_step(proc, timeout=600)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_PREEMPTED, err[-3000:]
    saved = checkpoints.latest(ckpt)
    assert saved is not None and saved.step > 0, "no checkpoint on SIGTERM"
    again = _train(*args, "--set", f"steps={saved.step + 3}", "--set", "log_every=1")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
    resumed = [r for r in _records(out) if r.get("event") == "resumed"]
    assert resumed and resumed[0]["step"] == saved.step


def test_a_checkpoint_saved_on_the_gpu_is_evaluated_on_gpu_and_cpu(
    corpus_uri: str, tmp_path: Path
) -> None:
    ckpt = f"file://{tmp_path}/ckpt"
    proc = _train("--data", corpus_uri, "--checkpoints", ckpt, "--config", "small", *SMALL,
                  "--set", "steps=20", "--set", "checkpoint_every=20")  # fmt: skip
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    saved = checkpoints.latest(ckpt)
    assert saved is not None
    losses = {}
    for where, extra in (("gpu", {}), ("cpu", {"CUDA_VISIBLE_DEVICES": "", "GANGWAY_GPUS": "0"})):
        env = {**_env(), **extra}
        res = subprocess.run(
            [sys.executable, "-m", "components.evaluation", "--data", corpus_uri,
             "--checkpoint", saved.uri, "--max-tokens", "16384",
             "--metrics-out", str(tmp_path / f"{where}.json"), "--register-as", ""],
            capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads((tmp_path / f"{where}.json").read_text())
        losses[where] = doc["checkpoints"][0]
    assert losses["cpu"]["device"] == "cpu"
    assert losses["gpu"]["device"] == ("cuda" if CUDA else "cpu")
    # bf16 autocast on the GPU: close to the fp32 CPU loss, not bit-equal.
    assert abs(losses["gpu"]["loss"] - losses["cpu"]["loss"]) < 0.02, losses
