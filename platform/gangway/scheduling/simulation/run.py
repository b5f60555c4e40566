"""Running the method: every policy on every seed's arrivals, and what each run measured.

:func:`simulate` replays the workload once per (policy, seed), in this process or in ``jobs``
worker processes, and returns one :class:`Run` each: the allocation curve, failed pods, the
fragmented GPU capacity at 100 % and 130 % arrived demand, and the time the policy took per
pod.
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gangway.errors import PermanentError, closest
from gangway.scheduling.packing import MILLI, Profile
from gangway.scheduling.simulation.arrivals import arrivals
from gangway.scheduling.simulation.policies import POLICIES
from gangway.scheduling.simulation.replay import allocation_curve, replay
from gangway.scheduling.simulation.trace import TraceNode, TracePod

__all__ = ["FIRST_SEED", "MARKS", "Run", "Workload", "check_policies", "simulate"]

FIRST_SEED = 42
"""The method's seeds are 42, 43, …"""
MARKS = (100, 130)
"""Arrived demand (% of GPU capacity) at which the headline numbers are read."""


@dataclass(frozen=True)
class Workload:
    """A cluster and the pods that arrive at it."""

    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]
    tune: float = 1.3
    """Arrivals stop before the GPU demand passes this × the cluster's GPU capacity."""

    @property
    def capacity_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def check(self) -> None:
        """Refuse a workload the metric cannot be read on, naming what to change."""
        if not self.capacity_gpus:
            raise PermanentError("the node list has no GPUs: the metric is GPU allocation")
        if not any(p.num_gpu for p in self.pods):
            raise PermanentError("the pod list has no GPU pods: the metric is GPU allocation")
        if not 0 < self.tune <= 10:
            raise PermanentError(f"--tune {self.tune}: give a ratio in (0, 10], e.g. 1.3")


@dataclass(frozen=True)
class Run:
    policy: str
    seed: int
    curve: tuple[float, ...]
    """GPU allocation % at arrived demand 0..130 % (NaN where arrivals never got)."""
    pods: int
    """Pods that arrived (placed or failed)."""
    failed: int
    failed_gpu_pods: int
    fragmented: dict[int, float]
    """Arrived % (:data:`MARKS`) → fragmented GPU capacity, % of capacity (NaN where
    arrivals never got)."""
    seconds: float
    """Time in the replay, placement included."""


def check_policies(names: Sequence[str]) -> list[str]:
    """The policy names, checked (a typo gets the nearest name)."""
    out = []
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue  # "random,gangway," or a space after a comma
        if name not in POLICIES:
            near = closest(name, sorted(POLICIES))
            hint = f"; did you mean {near}?" if near else ""
            known = ", ".join(POLICIES)
            raise PermanentError(f"--policy {raw!r}: no such policy (one of {known}){hint}")
        if name not in out:
            out.append(name)
    if not out:
        raise PermanentError("--policy: name at least one of " + ", ".join(POLICIES))
    return out


def run_one(
    work: Workload, policy: str, seed: int, progress: Callable[[int], None] | None = None
) -> Run:
    """One replay of ``policy`` on ``seed``'s arrivals."""
    cap = work.capacity_gpus
    arriving = arrivals(work.pods, seed=seed, capacity_gpus=cap, tune=work.tune)
    profile = Profile.of(p.shape for p in work.pods)
    started = time.perf_counter()
    out, _ = replay(
        work.nodes,
        arriving,
        POLICIES[policy](work.pods),
        seed=seed,
        profile=profile,
        marks=MARKS,
        progress=progress,
    )
    seconds = time.perf_counter() - started
    scale = cap * MILLI / 100
    return Run(
        policy=policy,
        seed=seed,
        curve=tuple(allocation_curve(out, cap)),
        pods=len(arriving),
        failed=out.failed,
        failed_gpu_pods=out.failed_gpu_pods,
        fragmented={k: out.fragmented.get(k, math.nan) / scale for k in MARKS},
        seconds=seconds,
    )


def arrivals_per_seed(work: Workload, seeds: Sequence[int]) -> dict[int, int]:
    """How many pods arrive for each seed (for a progress bar's total)."""
    cap = work.capacity_gpus
    return {s: len(arrivals(work.pods, seed=s, capacity_gpus=cap, tune=work.tune)) for s in seeds}


def simulate(
    work: Workload,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
) -> list[Run]:
    """Every policy on every seed; ``progress`` is told of pods replayed as they are."""
    tasks = [(p, s) for p in policies for s in seeds]
    if jobs <= 1 or len(tasks) == 1:
        return [run_one(work, p, s, progress) for p, s in tasks]
    done = {(r.policy, r.seed): r for r in _parallel(work, tasks, jobs, progress)}
    return [done[t] for t in tasks]


_WORK: Workload | None = None
_DONE: Any = None
"""In a worker: the pool's shared count of pods replayed (for the parent's progress bar)."""


def _start(work: Workload, done: Any) -> None:
    global _WORK, _DONE
    _WORK, _DONE = work, done
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # so that terminate() stops a worker


def _count(n: int) -> None:
    with _DONE.get_lock():
        _DONE.value += n


def _task(task: tuple[str, int]) -> Run:
    assert _WORK is not None
    return run_one(_WORK, *task, progress=_count)


def _parallel(
    work: Workload,
    tasks: list[tuple[str, int]],
    jobs: int,
    progress: Callable[[int], None] | None,
) -> Iterator[Run]:
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops the workers too
    context = multiprocessing.get_context("fork")
    done = context.Value("q", 0)
    pool = context.Pool(min(jobs, len(tasks)), _start, (work, done))
    told = 0
    try:
        results = pool.imap_unordered(_task, tasks)
        for _ in tasks:
            while True:
                try:
                    run = results.next(timeout=0.25)
                    break
                except multiprocessing.TimeoutError:
                    told = _tell(progress, done.value, told)
            told = _tell(progress, done.value, told)
            yield run
        pool.close()
    finally:
        pool.terminate()
        pool.join()
        signal.signal(signal.SIGTERM, previous)


def _tell(progress: Callable[[int], None] | None, now: int, told: int) -> int:
    if progress is not None and now > told:
        progress(now - told)
    return now


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
