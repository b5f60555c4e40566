"""What follows the model preset: its size (parameters, FLOPs per token, pod memory), its
training defaults; and the GPU-scale training features that run on CPUs too (gradient
accumulation with DDP's no_sync, compile keeping checkpoint keys, the logged throughput)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from components.config import TRAIN_PRESETS, load_config
from components.devices import peak_flops
from components.model import GPT, ModelConfig
from components.sizing import MODEL_PRESETS, eval_memory_gib, flops_per_token, param_count
from tests.helpers import REPO


@pytest.mark.parametrize("preset", list(MODEL_PRESETS))
def test_the_size_formula_is_the_real_models(preset: str) -> None:
    cfg = ModelConfig(**MODEL_PRESETS[preset])
    with torch.device("meta"):  # no memory: the gpu preset is 2.7 GB in fp32
        model = GPT(cfg)
    assert param_count(cfg.model_dump()) == sum(p.numel() for p in model.parameters())
    assert cfg.param_count() == param_count(cfg.model_dump())


def test_the_gpu_preset_is_about_682m_parameters_and_its_flops() -> None:
    shape = MODEL_PRESETS["gpu"]
    assert 681e6 < param_count(shape) < 683e6
    # 6N (no position embedding) + 12·L·C·T, PaLM's accounting: ≈ 4.5 GFLOPs a token.
    n = param_count(shape, embeddings=False)
    assert flops_per_token(shape) == 6 * n + 12 * 24 * 1536 * 1024
    assert 4.5e9 < flops_per_token(shape) < 4.6e9
    assert eval_memory_gib(shape) == 7  # 2 × 2.7 GB + the runtime: more than the old 2 Gi


@pytest.mark.parametrize(
    ("device", "peak"),
    [
        ("NVIDIA H200", 989e12),
        ("NVIDIA H100 80GB HBM3", 989e12),
        ("NVIDIA-H100-80GB-HBM3", 989e12),
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA GH200 480GB", 989e12),
        ("NVIDIA L4", 121e12),
        ("NVIDIA L40S", 362e12),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_the_peak_flops_table_knows_the_gpu_products(device: str, peak: float | None) -> None:
    assert peak_flops(device) == peak


def test_training_defaults_follow_the_preset() -> None:
    gpu = load_config("gpu")
    assert (gpu.batch_size, gpu.lr, gpu.warmup_steps) == (32, 3e-4, 200)
    assert (gpu.checkpoint_every, gpu.keep_last) == (500, 3)  # 8.2 GB each: not all kept
    tiny = load_config("tiny")
    assert (tiny.batch_size, tiny.lr, tiny.checkpoint_every, tiny.keep_last) == (16, 3e-3, 50, 0)
    assert load_config(None) == tiny  # the default model is tiny, with tiny's settings
    # What is given wins; a refined preset keeps its defaults.
    mine = load_config("gpu", {"lr": "1e-4", "keep_last": "0", "model.n_layer": "2"})
    assert (mine.lr, mine.keep_last, mine.batch_size, mine.model.n_layer) == (1e-4, 0, 32, 2)
    assert set(TRAIN_PRESETS) == set(MODEL_PRESETS)


def test_a_config_file_naming_a_preset_gets_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model: {preset: small, n_layer: 2}\nsteps: 10\n")
    cfg = load_config(str(path))
    assert (cfg.model.n_layer, cfg.lr, cfg.keep_last, cfg.steps) == (2, 1e-3, 5, 10)


def test_compiling_the_model_keeps_its_checkpoint_keys() -> None:
    model = GPT(ModelConfig(**MODEL_PRESETS["tiny"]))
    before = list(model.state_dict())
    model.compile()  # in place, as training does on GPUs (compiles lazily, at the first call)
    assert list(model.state_dict()) == before
    assert not any(k.startswith("_orig_mod") for k in model.state_dict())


@pytest.mark.e2e
def test_gradient_accumulation_in_a_gang_logs_its_throughput(
    tmp_path: Path, corpus_uri: str
) -> None:
    """Two gloo ranks, two micro-batches a step (the first under DDP's no_sync): the run
    completes, and each window logs step time, tokens/s and peak memory (MFU only on a GPU
    with a known peak), with the checkpoint's time apart."""
    argv = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
        "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", "--max-restarts=0",
        "-m", "components.training", "--data", corpus_uri,
        "--checkpoints", f"file://{tmp_path}/ckpt", "--config", "tiny",
        "--set", "model.block_size=32", "--set", "model.n_embd=32", "--set", "batch_size=4",
        "--set", "grad_accum=2", "--set", "steps=6", "--set", "log_every=3",
        "--set", "checkpoint_every=3", "--result-out", str(tmp_path / "result.json"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    logs = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    windows = [r for r in logs if "loss" in r and "step" in r]
    assert [w["step"] for w in windows] == [3, 6]
    for w in windows:
        assert w["step_time_s"] > 0 and w["tokens_per_s"] > 0 and w["peak_mem_gib"] > 0
        assert "mfu" not in w  # no GPU peak on a CPU
    saved = [r for r in logs if r.get("event") == "checkpoint"]
    assert [r["step"] for r in saved] == [3, 6] and all(r["seconds"] >= 0 for r in saved)
    result = json.loads((tmp_path / "result.json").read_text())
    # tokens per step: batch 4 × 2 micro-batches × 32 tokens × 2 ranks
    assert result["world_size"] == 2 and result["checkpoint_seconds"] >= 0
    assert result["last_tokens_per_s"] > 0 and result["final_loss"] < 6
