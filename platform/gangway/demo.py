"""The demo spine on this machine: stage → 2-rank torchrun training → evaluation → inference.

Each step runs its component in a subprocess, exactly as its container would; outputs live
under one state directory with ``file://`` storage. Re-running converges: staging skips
verified files, training resumes from its newest checkpoint, inference skips finished shards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoSettings", "StepResult", "demo_steps", "run_steps"]


@dataclass(frozen=True)
class DemoSettings:
    """What the demo runs; every field maps onto a component flag."""

    state_dir: Path
    nproc: int = 2
    steps: int = 300
    checkpoint_every: int = 100
    shards: int = 4
    max_bytes: int = 6_000_000
    model: str = "tiny"


@dataclass
class StepResult:
    name: str
    argv: list[str]
    log: Path
    status: str = "pending"
    seconds: float = 0.0
    returncode: int | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


def _py(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def demo_steps(s: DemoSettings) -> list[StepResult]:
    """The commands of the demo, in order (later steps read earlier steps' outputs)."""
    d = s.state_dir.resolve()
    uri = f"file://{d}"
    logs = d / "logs"
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(s.nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "127.0.0.1:0",
        "--max-restarts",
        "0",
    ]
    steps = [
        (
            "dataset",
            _py(
                "components.staging",
                "demo",
                "--out",
                f"{uri}/datasets/stdlib",
                "--max-bytes",
                str(s.max_bytes),
                "--inputs",
                f"{uri}/inputs/docs.jsonl",
            ),
        ),
        (
            "stage",
            _py(
                "components.staging",
                "stage",
                "--source",
                f"{uri}/datasets/stdlib",
                "--workdir",
                str(d / "work" / "stage"),
                "--publish",
                f"{uri}/corpus",
                "--result-out",
                str(d / "out" / "stage.json"),
            ),
        ),
        (
            "train",
            [
                *torchrun,
                "-m",
                "components.training",
                "--data",
                f"{uri}/corpus",
                "--checkpoints",
                f"{uri}/checkpoints",
                "--config",
                s.model,
                "--set",
                f"steps={s.steps}",
                "--set",
                f"checkpoint_every={s.checkpoint_every}",
                "--cache-dir",
                str(d / "cache"),
                "--result-out",
                str(d / "out" / "train.json"),
            ],
        ),
        (
            "evaluate",
            _py(
                "components.evaluation",
                "--data",
                f"{uri}/corpus",
                "--checkpoints",
                f"{uri}/checkpoints",
                "--metrics-out",
                f"{uri}/eval/metrics.json",
                "--best-out",
                str(d / "out" / "best.txt"),
            ),
        ),
        (
            "split",
            _py(
                "components.inference",
                "split",
                "--input",
                f"{uri}/inputs/docs.jsonl",
                "--shards",
                str(s.shards),
                "--out-prefix",
                f"{uri}/inputs/shards",
                "--list-out",
                str(d / "out" / "shards.json"),
            ),
        ),
    ]
    return [StepResult(name, argv, logs / f"{name}.log") for name, argv in steps]


def inference_steps(s: DemoSettings) -> list[StepResult]:
    """One inference step per shard listed by the split step (the ``withParam`` fan-out)."""
    d = s.state_dir.resolve()
    best = (d / "out" / "best.txt").read_text().strip()
    shards = json.loads((d / "out" / "shards.json").read_text())
    out = []
    for i, shard in enumerate(shards):
        target = f"file://{d}/predictions/shard-{i:05d}.jsonl"
        argv = _py(
            "components.inference",
            "run",
            "--checkpoint",
            best,
            "--input",
            shard,
            "--output",
            target,
            "--cache-dir",
            str(d / "cache"),
            "--result-out",
            str(d / "out" / f"infer-{i}.json"),
        )
        out.append(StepResult(f"infer[{i}]", argv, d / "logs" / f"infer-{i}.log"))
    return out


def run_steps(
    steps: list[StepResult], on_change: Callable[[StepResult], None] | None = None
) -> bool:
    """Run steps in order, stopping at the first failure; returns True when all succeeded."""
    for step in steps:
        step.log.parent.mkdir(parents=True, exist_ok=True)
        step.status = "running"
        if on_change:
            on_change(step)
        t0 = time.perf_counter()
        with step.log.open("w") as log:
            proc = subprocess.run(step.argv, stdout=log, stderr=subprocess.STDOUT, check=False)
        step.seconds = time.perf_counter() - t0
        step.returncode = proc.returncode
        step.status = "succeeded" if proc.returncode == 0 else "failed"
        step.outputs = _last_json(step.log)
        if on_change:
            on_change(step)
        if proc.returncode != 0:
            return False
    return True


def _last_json(log: Path) -> dict[str, Any]:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return {}
