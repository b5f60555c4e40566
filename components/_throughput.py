"""How fast training goes: step time, tokens/s, MFU and peak memory over a window of steps,
with the time spent writing checkpoints kept apart from the step time."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field

import torch

from components.devices import peak_flops

__all__ = ["Throughput"]


@dataclass
class Throughput:
    """A window of steps: started at ``t0``, ``steps`` steps trained, ``paused`` seconds of
    checkpointing inside it. ``tokens_per_step`` counts every rank's tokens."""

    device: torch.device
    tokens_per_step: int
    flops_per_token: float
    world: int
    t0: float = field(default_factory=time.perf_counter)
    steps: int = 0
    paused: float = 0.0
    peak: float | None = None

    def __post_init__(self) -> None:
        if self.device.type == "cuda":
            self.peak = peak_flops(torch.cuda.get_device_name(self.device))

    def window(self) -> dict[str, float | None]:
        """The window's numbers, then a new window. Call after a host sync (reading the loss)
        so the GPU's queued work is inside the window."""
        now = time.perf_counter()
        busy = max(1e-9, now - self.t0 - self.paused)
        tokens_per_s = self.tokens_per_step * self.steps / busy
        mfu = None
        if self.peak:
            mfu = self.flops_per_token * tokens_per_s / (self.peak * self.world)
        out = {
            "step_time_s": busy / max(1, self.steps),
            "tokens_per_s": tokens_per_s,
            "mfu": mfu,
            "peak_mem_gib": peak_memory_gib(self.device),
        }
        self.t0, self.steps, self.paused = now, 0, 0.0
        return out


def peak_memory_gib(device: torch.device) -> float:
    """The most memory this process has held: on the GPU, torch's allocator peak; on the CPU,
    the resident set's high-water mark."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**30 if sys.platform == "darwin" else 2**20)
