"""A training process's place in its gang: torchrun's environment, its device, the process
group, and the preemption vote that every rank takes together.

Imported only when training runs (it loads torch.distributed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import FrameType

import torch
import torch.distributed as dist

from components.devices import step_device
from components.failures import collective_timeout
from gangway.errors import TransientError

__all__ = ["Ranks", "StopFlag", "StopVote", "release_process_group", "setup_process_group"]


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
    ranks = Ranks(world, rank, local_rank, step_device(local_rank, local_world))
    if ranks.cuda:
        torch.cuda.set_device(ranks.device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    else:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(
            int(threads) if threads.isdigit() else max(1, (os.cpu_count() or 1) // local_world)
        )
    if ranks.distributed:
        timeout = collective_timeout()
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
        self.group = dist.new_group(backend="gloo") if ranks.distributed and ranks.cuda else None
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
