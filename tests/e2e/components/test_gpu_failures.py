"""Failure classes on GPUs, tested with the exceptions torch raises injected into real runs:
out of GPU memory and device errors are permanent (1) and say what to change; NCCL timeouts and
lost peers are transient (75); a rank that stops making progress is detected within the
collective timeout. And a pod that asked for GPUs but sees none refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch._inductor.exc import CppCompileError, InvalidCxxCompiler
from torch.distributed.checkpoint.api import CheckpointException

from components._ranks import Ranks, settle
from components.failures import classify, collective_timeout
from gangway.contract import ENV_GPUS, EXIT_PERMANENT, EXIT_PREEMPTED, EXIT_TRANSIENT
from gangway.errors import PermanentError, TransientError
from tests.helpers import REPO
from tests.helpers.inject_fault import FAULTS

SMALL = [
    "--config", "tiny", "--set", "model.block_size=32", "--set", "model.n_embd=32",
    "--set", "batch_size=8", "--set", "log_every=1", "--set", "steps=6",
    "--set", "checkpoint_every=100",
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "distributed", "kind", "says"),
    [
        (FAULTS["oom"], False, PermanentError, "out of GPU memory at batch 32 (step 7, cuda:0)"),
        (FAULTS["oom"], True, PermanentError, "lower batch_size (--set batch_size=N)"),
        (FAULTS["assert"], True, PermanentError, "GPU device error (step 7, cuda:0)"),
        (lambda: torch.AcceleratorError("CUDA error: an illegal memory access"), True,
         PermanentError, "not a lost peer"),
        (lambda: RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx"), True,
         PermanentError, "GPU device error"),
        (FAULTS["nccl-timeout"], True, TransientError, "Watchdog caught collective operation"),
        (lambda: dist.DistNetworkError("Connection reset by peer"), True, TransientError,
         "a peer rank was lost or the network failed"),
        (lambda: dist.DistStoreError("Timed out after 901 seconds waiting for clients"), False,
         TransientError, "resumes from its latest checkpoint"),
        (lambda: RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer"),
         True, TransientError, "a peer rank was probably lost"),
        (lambda: RuntimeError("Connection closed by peer"), False, None, ""),
        (lambda: ValueError("a bug"), True, None, ""),
        (lambda: RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x64 and 32x64)"),
         True, None, ""),
        (lambda: torch.AcceleratorError("CUDA error: uncorrectable ECC error encountered"),
         True, TransientError, "GPU hardware fault (step 7, cuda:0)"),
        (lambda: RuntimeError("CUDA error: GPU has fallen off the bus"), False, TransientError,
         "the node's GPU failed, not the job"),
        (lambda: InvalidCxxCompiler("/nonexistent/g++"), True, PermanentError,
         "torch.compile failed (step 7, cuda:0)"),
        (lambda: CppCompileError(["g++", "k.cpp"], "fatal error: Python.h: No such file"), True,
         PermanentError, "--set compile=false"),
    ],
    ids=["oom", "oom-in-a-gang", "device-side-assert", "accelerator-error", "cublas",
         "nccl-timeout", "network", "store", "gloo-lost-peer", "runtime-error-alone", "bug",
         "shape-bug-in-a-gang", "ecc", "fallen-off-the-bus", "no-c-compiler", "compile-error"],
)  # fmt: skip
def test_failures_are_classed_by_what_a_retry_can_fix(
    make: Callable[[], BaseException], distributed: bool, kind: type | None, says: str
) -> None:
    err = classify(make(), where="step 7, cuda:0", batch_size=32, distributed=distributed)
    if kind is None:
        assert err is None  # a bug: raised as it is (permanent, with its traceback)
        return
    assert isinstance(err, kind) and says in str(err), err
    assert err is not None and err.exit_code == (
        EXIT_PERMANENT if kind is PermanentError else EXIT_TRANSIENT
    )
    assert "peer" not in str(err) or kind is TransientError or "not a lost peer" in str(err)


def test_a_checkpoint_failure_is_classed_by_what_failed_inside_it() -> None:
    """DCP wraps each rank's failure in a CheckpointException (a BaseException)."""
    alone = Ranks(world=1, rank=0, local_rank=0, device=torch.device("cpu"))
    inner = TransientError("s3://b/ckpt: 503 Slow Down")
    wrapped = CheckpointException("save failed", {0: (inner, traceback.StackSummary())})
    assert settle(wrapped, alone, where="checkpoint", batch_size=8) is inner
    oom = CheckpointException("save failed", {1: (FAULTS["oom"](), traceback.StackSummary())})
    err = settle(oom, alone, where="checkpoint at step 5, cuda:0", batch_size=8)
    assert isinstance(err, PermanentError) and "out of GPU memory at batch 8" in str(err)


@pytest.mark.parametrize(
    ("codes", "sigterm", "expected"),
    [
        ([1, 75], False, EXIT_PERMANENT),  # one rank's OOM, its peer lost: the OOM decides
        ([1, 143], True, EXIT_PERMANENT),  # torn down for that failure: still the failure
        ([75, 143], True, EXIT_PREEMPTED),
        ([75], False, EXIT_TRANSIENT),  # a worker died without reporting
        ([0, 0], True, EXIT_PREEMPTED),
    ],
)
def test_the_gang_pod_exits_with_the_cause(codes: list[int], sigterm: bool, expected: int) -> None:
    from gangway.step.launch import gang_exit_code

    assert gang_exit_code(1, codes, sigterm) == expected


def test_the_collective_timeout_is_bounded_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANGWAY_COLLECTIVE_TIMEOUT_S", raising=False)
    assert collective_timeout().total_seconds() == 300
    monkeypatch.setenv("GANGWAY_COLLECTIVE_TIMEOUT_S", "12.5")
    assert collective_timeout().total_seconds() == 12.5
    for bad in ("soon", "0", "-3"):
        monkeypatch.setenv("GANGWAY_COLLECTIVE_TIMEOUT_S", bad)
        with pytest.raises(PermanentError, match="GANGWAY_COLLECTIVE_TIMEOUT_S"):
            collective_timeout()


def _train(
    tmp_path: Path, corpus: str, fault: str, *, ranks: int, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    launch = [
        "-m", "gangway.step.launch", "--nnodes=1", f"--nproc-per-node={ranks}",
        "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", "--max-restarts=0",
    ]  # fmt: skip
    argv = [
        sys.executable,
        *(launch if ranks > 1 else []),
        "-m",
        "tests.helpers.inject_fault",
        "--data",
        corpus,
        "--checkpoints",
        f"file://{tmp_path}/ckpt",
        *SMALL,
    ]
    t0 = time.monotonic()
    res = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env={**os.environ, "GANGWAY_TEST_FAULT": fault, "OMP_NUM_THREADS": "1", **(env or {})},
        check=False,
    )
    return res, time.monotonic() - t0


@pytest.mark.e2e
def test_out_of_gpu_memory_stops_the_attempt_naming_the_batch(
    tmp_path: Path, corpus_uri: str
) -> None:
    res, _ = _train(tmp_path, corpus_uri, "oom:0:2", ranks=1)
    assert res.returncode == EXIT_PERMANENT, res.stderr
    assert "error: out of GPU memory at batch 8 (step 2, cpu)" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.e2e
def test_one_ranks_oom_fails_the_gang_for_good_not_as_a_lost_peer(
    tmp_path: Path, corpus_uri: str
) -> None:
    """Rank 1 runs out of memory; rank 0 then sees a lost peer (75). The pod exits 1, so
    Volcano aborts the Job instead of restarting the whole gang three times."""
    res, _ = _train(tmp_path, corpus_uri, "oom:1:2", ranks=2)
    assert res.returncode == EXIT_PERMANENT, res.stderr[-3000:]
    assert "out of GPU memory at batch 8" in res.stderr
    # Rank 0 read rank 1's failure in the rendezvous store: in a gang of several pods, its
    # pod exits 1 too, instead of 75 restarting the Job.
    assert "error: rank 1: out of GPU memory" in res.stderr, res.stderr[-3000:]
    assert "this rank then lost its peer" in res.stderr


@pytest.mark.e2e
def test_an_nccl_timeout_restarts_the_gang(tmp_path: Path, corpus_uri: str) -> None:
    res, _ = _train(tmp_path, corpus_uri, "nccl-timeout:1:2", ranks=2)
    assert res.returncode == EXIT_TRANSIENT, res.stderr[-3000:]
    assert "a collective failed (step 2, cpu)" in res.stderr


@pytest.mark.e2e
def test_a_stuck_peer_is_detected_within_the_collective_timeout(
    tmp_path: Path, corpus_uri: str
) -> None:
    """Rank 1 stops making progress (outside any collective); rank 0 waits in its all-reduce
    until the collective timeout (10 s here, 300 s by default) and the gang ends transient."""
    res, took = _train(
        tmp_path, corpus_uri, "hang:1:2", ranks=2, env={"GANGWAY_COLLECTIVE_TIMEOUT_S": "10"}
    )
    assert res.returncode == EXIT_TRANSIENT, res.stderr[-3000:]
    assert took < 90, f"took {took:.0f}s to detect a stuck peer"
    assert "a collective failed" in res.stderr


@pytest.mark.e2e
def test_a_gpu_pod_that_sees_no_gpu_refuses_to_start(tmp_path: Path, corpus_uri: str) -> None:
    """The pod asked for a GPU (GANGWAY_GPUS=1, as the pipeline sets it) but CUDA sees none
    (this machine): training, evaluation and inference refuse at once, naming why."""
    env = {**os.environ, ENV_GPUS: "1", "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "components.training", "--data", corpus_uri]
    argv += ["--checkpoints", f"file://{tmp_path}/ckpt", *SMALL]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert res.returncode == EXIT_PERMANENT, res.stderr
    assert "this pod requested 1 GPU(s) but CUDA sees 0" in res.stderr
    assert "not running on the CPU instead" in res.stderr
    assert not (tmp_path / "ckpt").exists()
