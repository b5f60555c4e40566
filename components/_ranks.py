"""A training process's place in its gang: torchrun's environment, its device, the process
group, the preemption vote that every rank takes together, and how a rank's failure is settled
for the exit-code contract (:func:`settle`).

Imported only when training runs (it loads torch.distributed).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from components.devices import step_device
from components.failures import classify, collective_timeout, unwrap
from gangway.errors import GangwayError, PermanentError, TransientError

__all__ = [
    "Ranks",
    "StopFlag",
    "StopVote",
    "release_process_group",
    "settle",
    "setup_process_group",
]

T = TypeVar("T")
PERMANENT_KEY = "gangway/permanent"
"""Set in the rendezvous store by a rank that failed for good, for the ranks it leaves behind."""


class StopFlag:
    """Set by SIGTERM; read at step boundaries."""

    def __init__(self) -> None:
        self.set = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.set = True


@dataclass(frozen=True)
class Ranks:
    """This process's place in the gang (torchrun's environment) and its device."""

    world: int
    rank: int
    local_rank: int
    device: torch.device

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def distributed(self) -> bool:
        return self.world > 1


def setup_process_group() -> Ranks:
    """Read torchrun's environment, choose the device (refusing a GPU pod that sees no GPU)
    and join the process group. Collective."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    timeout = collective_timeout()  # checked even alone: a typo should not wait for a gang
    ranks = Ranks(world, rank, local_rank, step_device(local_rank, local_world))
    if ranks.cuda:
        torch.cuda.set_device(ranks.device)
        torch.set_float32_matmul_precision("high")  # TF32 for what runs outside bf16 autocast
    else:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(
            int(threads) if threads.isdigit() else max(1, (os.cpu_count() or 1) // local_world)
        )
    if ranks.distributed:
        try:
            # A bounded collective timeout: a rank stuck waiting for a dead peer gives up (NCCL's
            # watchdog aborts the communicator) and the gang restarts, instead of hanging.
            dist.init_process_group(
                "nccl" if ranks.cuda else "gloo",
                timeout=timeout,
                device_id=ranks.device if ranks.cuda else None,
            )
        except (RuntimeError, TimeoutError) as e:  # rendezvous or transport failure
            raise TransientError(f"process group init failed: {e}") from e
    return ranks


def release_process_group(ranks: Ranks) -> None:
    if ranks.distributed and dist.is_initialized():
        dist.destroy_process_group()


class StopVote:
    """Whether every rank has agreed to stop, without a host-device sync on the hot path.

    Each step starts an asynchronous MAX all-reduce of this rank's SIGTERM flag over a CPU
    (gloo) group and reads the previous step's result, which every rank reads alike: a SIGTERM
    is acted on one step later, on every rank at the same step. (Acting on the local flag would
    stop one rank alone and deadlock its peers.) On GPUs the vote never touches the device."""

    def __init__(self, ranks: Ranks) -> None:
        self.distributed = ranks.distributed
        self.group = (
            dist.new_group(backend="gloo", timeout=collective_timeout())
            if ranks.distributed and ranks.cuda
            else None
        )
        self.flag = torch.zeros(1)
        self.work: dist.Work | None = None

    def agreed(self, local: bool) -> bool:
        """True once every rank has seen the stop (at the same step on every rank)."""
        if not self.distributed:
            return local
        if self.work is not None:
            self.work.wait()
            self.work = None
            if self.flag.item():
                return True
        self.flag.fill_(1.0 if local else 0.0)
        self.work = dist.all_reduce(
            self.flag, op=dist.ReduceOp.MAX, group=self.group, async_op=True
        )
        return False

    def drain(self) -> None:
        """Wait for the vote in flight (before the process group goes away)."""
        if self.work is not None:
            self.work.wait()
            self.work = None


def settle(e: BaseException, ranks: Ranks, *, where: str, batch_size: int) -> BaseException:
    """The exception this rank ends with for ``e`` (:func:`components.failures.classify`;
    ``e`` itself when it is not a known failure).

    In a gang, one rank's permanent failure (out of memory, say) makes its peers fail as lost
    peers, each pod deciding alone: a pod exiting 75 would restart the whole Job before the
    pod exiting 1 could abort it. So a rank that fails for good says so in the rendezvous
    store first, and a rank that lost a peer checks there: if one failed for good, so does it.
    """
    err = classify(unwrap(e), where=where, batch_size=batch_size, distributed=ranks.distributed)
    if err is None or not ranks.distributed:
        return e if err is None else err
    store = _store()
    if store is None:
        return err
    if isinstance(err, PermanentError):
        _try(lambda: store.set(PERMANENT_KEY, f"rank {ranks.rank}: {err}"))
        return err
    if isinstance(err, TransientError):
        cause = _try(
            lambda: store.get(PERMANENT_KEY).decode() if store.check([PERMANENT_KEY]) else None
        )
        if cause:
            return PermanentError(f"{cause} (this rank then lost its peer: {str(err)[:200]})")
    return err


def _store() -> Any:
    if not dist.is_initialized():
        return None
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set_timeout(timedelta(seconds=5))  # the store's host may be gone too
        return store
    except (RuntimeError, ValueError):
        return None


def _try(op: Callable[[], T]) -> T | None:
    try:
        return op()
    except (RuntimeError, ValueError, GangwayError):
        return None
