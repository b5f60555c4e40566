"""Training: config validation, checkpoints, and real 2-rank torchrun runs (gloo) that are
stopped with SIGTERM and resume to the same final weights as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from components import checkpoints
from components.config import TrainConfig, load_config
from gangway import storage
from gangway.errors import PermanentError
from tests.helpers import REPO, run_module
from tests.helpers.runs import FAST, torchrun
from tests.helpers.servers import make_bucket


def final_weights(ckpt_root: str, tmp: Path) -> dict[str, torch.Tensor]:
    from components._loading import load_model

    last = checkpoints.latest(ckpt_root)
    assert last is not None
    return load_model(last, tmp).state_dict()


# ---- config -------------------------------------------------------------------------------


def test_presets_files_and_overrides(tmp_path: Path) -> None:
    assert load_config(None) == TrainConfig()
    assert load_config("small").model.n_layer == 4
    f = tmp_path / "c.yaml"
    f.write_text("model: {preset: small, n_layer: 6}\nsteps: 7\n")
    cfg = load_config(str(f), {"lr": "0.01", "model.n_head": "2", "bf16": "false"})
    assert (cfg.model.n_layer, cfg.model.n_head, cfg.steps, cfg.lr, cfg.bf16) == (
        6,
        2,
        7,
        0.01,
        False,
    )


@pytest.mark.parametrize(
    ("source", "overrides", "messages"),
    [
        pytest.param(None, {"steps": "0", "lr": "-1"}, ["steps:", "lr:"], id="all-errors-at-once"),
        pytest.param(None, {"stepz": "5"}, ["stepz: Extra inputs"], id="unknown-field"),
        pytest.param(
            None,
            {"model.n_embd": "100", "model.n_head": "3"},
            ["divisible"],
            id="heads-must-divide",
        ),
        pytest.param("huge", {}, ["not a preset"], id="unknown-preset-or-file"),
        pytest.param(None, {"model": "huge"}, ["unknown preset 'huge'"], id="unknown-model"),
        pytest.param(None, {"batch_size": "many"}, ["batch_size:", "'many'"], id="not-a-number"),
    ],
)
def test_config_errors_name_the_field(
    source: str | None, overrides: dict[str, str], messages: list[str]
) -> None:
    with pytest.raises(PermanentError) as err:
        load_config(source, overrides)
    for m in messages:
        assert m in str(err.value)


def test_malformed_config_file(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("steps: [1, 2\n")
    with pytest.raises(PermanentError, match="not valid YAML"):
        load_config(str(f))
    f.write_text("- a list\n")
    with pytest.raises(PermanentError, match="mapping"):
        load_config(str(f))


def test_cli_bad_config_exits_1_without_traceback(corpus_uri: str, tmp_path: Path) -> None:
    res = run_module(
        "components.training",
        "--data",
        corpus_uri,
        "--checkpoints",
        str(tmp_path / "ck"),
        "--set",
        "steps=-3",
    )
    assert res.returncode == 1
    assert "steps:" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "ck").exists()


# ---- single process ---------------------------------------------------------------------


def test_single_process_run_checkpoints_and_resumes(corpus_uri: str, tmp_path: Path) -> None:
    from components.training import train

    cfg = load_config(
        "tiny",
        {
            "steps": "12",
            "checkpoint_every": "5",
            "model.block_size": "32",
            "model.n_embd": "32",
            "batch_size": "4",
            "log_every": "4",
        },
    )
    ck = f"file://{tmp_path}/ck"
    out = train(cfg, corpus_uri, ck, cache_dir=tmp_path / "cache")
    assert [c["step"] for c in out["checkpoints"]] == [5, 10, 12]
    assert [c.step for c in checkpoints.complete(ck)] == [5, 10, 12]
    # A half-written checkpoint (no manifest) is never loaded.
    storage.write_bytes(storage.join(ck, "step-99999999/.metadata"), b"partial")
    again = train(
        cfg.model_copy(update={"steps": 15}), corpus_uri, ck, cache_dir=tmp_path / "cache"
    )
    assert again["resumed_from"] == 12
    assert [c["step"] for c in again["checkpoints"]] == [15]
    assert checkpoints.prune(ck, keep_last=2) == [5, 10]
    assert [c.step for c in checkpoints.complete(ck)] == [12, 15]


# ---- 2 ranks under torchrun ---------------------------------------------------------------


@pytest.mark.e2e
def test_torchrun_sigterm_then_resume_matches_uninterrupted(
    corpus_uri: str, s3_endpoint: str, tmp_path: Path
) -> None:
    steps, every = 60, 20
    straight = f"file://{tmp_path}/straight"
    p = torchrun(corpus_uri, straight, steps, every, tmp_path / "straight.log")
    assert p.wait(timeout=300) == 0, (tmp_path / "straight.log").read_text()[-3000:]

    # The interrupted run checkpoints to a real S3 API server: each rank uploads its shard.
    resumed = f"s3://{make_bucket(s3_endpoint)}/wf-uid/train"
    log = tmp_path / "interrupted.log"
    p = torchrun(corpus_uri, resumed, steps, every, log)
    deadline = time.monotonic() + 240
    while '"event": "checkpoint"' not in log.read_text():
        assert p.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=120)
    text = log.read_text()
    assert rc != 0 and '"event": "preempted"' in text, text[-3000:]
    stopped_at = checkpoints.latest(resumed)
    assert stopped_at is not None and every <= stopped_at.step < steps
    assert stopped_at.metadata["world_size"] == 2

    p = torchrun(corpus_uri, resumed, steps, every, tmp_path / "resume.log")
    assert p.wait(timeout=300) == 0, (tmp_path / "resume.log").read_text()[-3000:]
    assert f'"event": "resumed", "step": {stopped_at.step}' in (tmp_path / "resume.log").read_text()

    a = final_weights(straight, tmp_path / "a")
    b = final_weights(resumed, tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ from uninterrupted"


def test_component_help() -> None:
    for mod in (
        "components.staging",
        "components.training",
        "components.evaluation",
        "components.inference",
    ):
        res = run_module(mod, "--help")
        assert res.returncode == 0 and "usage:" in res.stdout, res.stderr


def test_worker_exits_143_on_sigterm(corpus_uri: str, tmp_path: Path) -> None:
    """A single worker (no torchrun) saves a checkpoint at the next step and exits 143."""
    log = tmp_path / "w.log"
    argv = [
        sys.executable,
        "-m",
        "components.training",
        "--data",
        corpus_uri,
        "--checkpoints",
        f"file://{tmp_path}/ck",
        "--set",
        "steps=100000",
        "--set",
        "checkpoint_every=100000",
        *FAST,
    ]
    p = subprocess.Popen(
        argv,
        cwd=REPO,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 120
    while '"step": 5' not in log.read_text():
        assert p.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    saved = checkpoints.latest(f"file://{tmp_path}/ck")
    assert saved is not None and saved.step >= 5
    assert "Traceback" not in log.read_text()
