"""What a failure inside training, evaluation or inference means for a retry.

Torch reports almost everything as a ``RuntimeError``; the exit-code contract
(:mod:`gangway.errors`) needs to know which of them a retry can fix. :func:`classify` decides
from the exception's *type* where torch gives one, and from the text only where the library
gives nothing else — CUDA's device and hardware errors and gloo's lost peers, all raised as a
plain ``RuntimeError``. This is the one place Gangway branches on message text, and only on
text it did not write (:mod:`gangway.errors` raises by class):

==========================================  ==========  ======================================
failure                                     class       why
==========================================  ==========  ======================================
``torch.OutOfMemoryError`` (CUDA OOM)       permanent   the same batch on the same GPU runs out
                                                        again: lower the batch
a device-side assert, an illegal memory     permanent   a bad index or a broken kernel fails
access, a cuBLAS/cuDNN error, another                   the same way on retry
``torch.AcceleratorError``
``torch.compile`` failing (dynamo,          permanent   the same code compiles the same way:
inductor, no C compiler)                                ``--set compile=false`` or fix it
an ECC error, a GPU fallen off the bus,     transient   the node's hardware, not the job: the
an Xid, an NVLink error, a busy device                  gang restarts (and may move)
``DistBackendError`` (an NCCL timeout, an   transient   a peer died or the fabric hiccupped:
aborted communicator), ``DistNetworkError``,            the gang restarts and resumes from its
``DistStoreError`` (rendezvous store)                   checkpoint
a ``RuntimeError`` reading as a lost        transient   how gloo reports a dead peer
connection (closed or reset by peer, a
socket timeout), in a gang
anything else                               (raised)    a bug: permanent, with its traceback
==========================================  ==========  ======================================

A collective that waits on a dead peer is bounded by the process group's timeout
(:func:`collective_timeout`, 5 minutes by default): NCCL's watchdog then aborts the
communicator and the next collective raises ``DistBackendError``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from gangway.errors import GangwayError, PermanentError, TransientError

__all__ = [
    "DEVICE_ERROR_MARKERS",
    "HARDWARE_MARKERS",
    "LOST_PEER_MARKERS",
    "classify",
    "collective_timeout",
    "first_line",
    "unwrap",
]

DEVICE_ERROR_MARKERS = (
    "CUDA error",
    "device-side assert",
    "CUBLAS_STATUS",
    "cuDNN error",
    "CUDNN_STATUS",
    "illegal memory access",
)
"""How CUDA's own errors read when torch raises them as a plain ``RuntimeError``."""
HARDWARE_MARKERS = (
    "ECC error",
    "uncorrectable",
    "fallen off the bus",
    "Xid",
    "NVLink",
    "busy or unavailable",
)
"""Device errors that are the node's hardware failing, not the job's code."""
LOST_PEER_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "Socket Timeout",
    "Timed out",
    "timed out",
    "gloo/transport",
)
"""How gloo reports a peer that went away (as a plain ``RuntimeError``)."""

TIMEOUT_ENV = "GANGWAY_COLLECTIVE_TIMEOUT_S"


def collective_timeout() -> timedelta:
    """How long a collective waits for its peers before the gang gives up (and restarts):
    ``GANGWAY_COLLECTIVE_TIMEOUT_S`` seconds, default 300."""
    text = os.environ.get(TIMEOUT_ENV, "300")
    try:
        seconds = float(text)
    except ValueError:
        raise PermanentError(f"{TIMEOUT_ENV}={text!r}: give a number of seconds") from None
    if seconds <= 0:
        raise PermanentError(f"{TIMEOUT_ENV}={text!r}: must be positive")
    return timedelta(seconds=seconds)


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s message (at most 300 characters), or its type's name."""
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


def classify(
    e: BaseException, *, where: str, batch_size: int | None = None, distributed: bool = False
) -> GangwayError | None:
    """The Gangway error ``e`` stands for, or None when it is not a known failure (a bug:
    let it propagate). ``where`` says what was running ("step 120", "checkpoint step-…");
    ``batch_size`` goes into the out-of-memory advice; ``distributed``: the process is one
    rank of a gang, so an unexplained collective failure means a peer was lost."""
    import torch
    import torch.distributed as dist

    if isinstance(e, GangwayError):
        return e
    if isinstance(e, torch.OutOfMemoryError):
        batch = f" at batch {batch_size}" if batch_size else ""
        return PermanentError(
            f"out of GPU memory{batch} ({where}): lower batch_size (--set batch_size=N) and "
            "raise grad_accum to keep the tokens per step, or choose a smaller model preset; "
            f"retrying the same settings fails the same way. torch said: {first_line(e)}"
        )
    text = str(e)
    gpu = isinstance(e, torch.AcceleratorError) or (
        isinstance(e, RuntimeError) and any(m in text for m in DEVICE_ERROR_MARKERS)
    )
    if gpu and any(m in text for m in HARDWARE_MARKERS):
        return TransientError(
            f"GPU hardware fault ({where}): {first_line(e)}; the node's GPU failed, not the "
            "job: the gang restarts (drain the node if it repeats)"
        )
    if gpu:
        return PermanentError(
            f"GPU device error ({where}): {first_line(e)}; this is not a lost peer, and the "
            "attempt is not retried. A device-side assert usually means a bad index (token ids "
            "outside the vocabulary); rerun with CUDA_LAUNCH_BLOCKING=1 to see where"
        )
    if _compile_error(e):
        return PermanentError(
            f"torch.compile failed ({where}): {first_line(e)}; it fails the same way on "
            "retry: train uncompiled with --set compile=false, or fix the compiler (the image "
            "has g++; a local run needs a C compiler on PATH)"
        )
    if isinstance(e, dist.DistError):
        return TransientError(
            f"a collective failed ({where}): {first_line(e)}; a peer rank was lost or the "
            "network failed: the gang restarts and resumes from its latest checkpoint"
        )
    if distributed and isinstance(e, RuntimeError) and any(m in text for m in LOST_PEER_MARKERS):
        return TransientError(
            f"a collective failed ({where}; a peer rank was probably lost): {first_line(e)}"
        )
    return None


def _compile_error(e: BaseException) -> bool:
    """Whether ``e`` comes from ``torch.compile`` (dynamo or inductor) rather than the model."""
    from torch._dynamo.exc import TorchDynamoException
    from torch._inductor import exc

    kinds = (exc.CppCompileError, exc.CUDACompileError, exc.InvalidCxxCompiler, exc.TritonMissing)
    return isinstance(e, (TorchDynamoException, *kinds))


def unwrap(e: BaseException) -> BaseException:
    """What failed inside a distributed checkpoint's ``CheckpointException`` (a BaseException
    that carries each rank's failure)."""
    from torch.distributed.checkpoint.api import CheckpointException

    if isinstance(e, CheckpointException):
        for failure in e.failures.values():
            inner = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(inner, BaseException):
                return inner
    return e
