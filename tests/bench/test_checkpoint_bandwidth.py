"""Benchmark: checkpoint save + restore vs a raw write/read of the same bytes to the same disk.

The checkpoint path is the real one (``components.checkpoints``): DCP shards written and
fsynced, sha256 of every file into the manifest, publish by rename; restore verifies every
file's sha256 and loads with DCP. The baseline writes the same tensor bytes to one file on the
same filesystem (with fsync) and reads them back. Goal: ≥ 0.8× (ratio = baseline time /
checkpoint time). Run with ``make bench``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from components import checkpoints
from components.model import GPT, ModelConfig
from tests.helpers import REPO

pytestmark = pytest.mark.benchmark
ROUNDS = 3


def _state() -> tuple[dict[str, Any], int]:
    torch.manual_seed(0)
    model = GPT(ModelConfig(block_size=64, n_layer=6, n_head=12, n_embd=768))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 256, (1, 16))
    model.loss(x, x).backward()  # type: ignore[no-untyped-call]
    opt.step()
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    nbytes = sum(t.numel() * t.element_size() for t in _tensors(state))
    return state, nbytes


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in _tensors(v)]
    return []


def _raw(state: dict[str, Any], path: Path) -> tuple[float, float]:
    blobs = [
        t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
        for t in _tensors(state)
    ]
    t0 = time.perf_counter()
    with path.open("wb") as f:
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    t1 = time.perf_counter()
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass
    t2 = time.perf_counter()
    path.unlink()
    return t1 - t0, t2 - t1


def test_checkpoint_vs_raw_bandwidth(tmp_path: Path) -> None:
    state, nbytes = _state()
    saves, loads, raw_w, raw_r = [], [], [], []
    for i in range(ROUNDS):
        w, r = _raw(state, tmp_path / "raw.bin")
        raw_w.append(w)
        raw_r.append(r)
        root = f"file://{tmp_path}/ck{i}"
        t0 = time.perf_counter()
        ck = checkpoints.save(root, 1, state, config={}, metadata={})
        saves.append(time.perf_counter() - t0)
        fresh = {
            "model": {k: torch.empty_like(v) for k, v in state["model"].items()},
            "optim": state["optim"],
        }
        t0 = time.perf_counter()
        checkpoints.load(ck, fresh, tmp_path / "cache")
        loads.append(time.perf_counter() - t0)
        assert all(torch.equal(fresh["model"][k], state["model"][k]) for k in state["model"])
    med = {
        k: statistics.median(v)
        for k, v in {"save": saves, "restore": loads, "raw_write": raw_w, "raw_read": raw_r}.items()
    }
    mb = nbytes / 1e6
    report: dict[str, Any] = {
        "megabytes": round(mb, 1),
        "seconds": {k: round(v, 3) for k, v in med.items()},
        "mb_per_s": {k: round(mb / v, 1) for k, v in med.items()},
        "ratio_save": round(med["raw_write"] / med["save"], 2),
        "ratio_restore": round(med["raw_read"] / med["restore"], 2),
        "ratio_save_plus_restore": round(
            (med["raw_write"] + med["raw_read"]) / (med["save"] + med["restore"]), 2
        ),
    }
    print("\ncheckpoint bandwidth:", json.dumps(report, indent=2))
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "checkpoint_bandwidth.json").write_text(json.dumps(report, indent=2) + "\n")
    assert report["ratio_save_plus_restore"] > 0
