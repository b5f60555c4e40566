"""Replaying arrivals against a policy: one pod at a time against the current state, placed at
once or dropped for good (nothing departs, nothing queues), and the method's metric — GPU
allocation % against arrived demand %, 0–130.

The cluster is held as arrays (:class:`gangway.scheduling.packing.Nodes`): per node CPU and memory
left, and per GPU its idle milli (a node's absent GPUs are −1). A node can take a pod when CPU and
memory suffice and, for a GPU pod, its model is allowed and — for one GPU — some GPU has the
milli idle (a whole-GPU pod needs a completely free one), or — for several — that many GPUs
are completely free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangway.scheduling.packing import MILLI, Choice, Nodes, Packer, Profile
from gangway.scheduling.simulation.trace import TraceNode, TracePod

__all__ = [
    "Choice",
    "Cluster",
    "Outcome",
    "Policy",
    "PolicyMaker",
    "allocation_curve",
    "fragmented_milli",
    "replay",
]


@dataclass
class Cluster(Nodes):
    capacity_gpus: int = 0

    @classmethod
    def of(cls, nodes: Sequence[TraceNode]) -> Cluster:
        width = max((n.gpus for n in nodes), default=0) or 1
        idle = np.full((len(nodes), width), -1, dtype=np.int64)
        for i, n in enumerate(nodes):
            idle[i, : n.gpus] = MILLI
        models: dict[str | None, int] = {}
        return cls(
            cpu=np.array([n.cpu_milli for n in nodes], dtype=np.int64),
            memory=np.array([n.memory_mib for n in nodes], dtype=np.int64),
            gpu_idle=idle,
            model=np.array([models.setdefault(n.model, len(models)) for n in nodes], np.int32),
            models=models,
            capacity_gpus=sum(n.gpus for n in nodes),
        )

    def feasible(self, pod: TracePod) -> npt.NDArray[np.bool_]:
        """The nodes that can take ``pod`` now."""
        ok = (self.cpu >= pod.cpu_milli) & (self.memory >= pod.memory_mib)
        if not pod.num_gpu:
            return ok
        if pod.models:
            codes = [self.models[m] for m in pod.models if m in self.models]
            ok &= np.isin(self.model, codes)
        if pod.num_gpu == 1:
            room: npt.NDArray[np.bool_] = self.gpu_idle.max(axis=1) >= pod.gpu_milli
        else:
            room = (self.gpu_idle == MILLI).sum(axis=1) >= pod.num_gpu
        return ok & room

    def place(self, pod: TracePod, node: int, gpus: Sequence[int]) -> None:
        self.cpu[node] -= pod.cpu_milli
        self.memory[node] -= pod.memory_mib
        for g in gpus:
            self.gpu_idle[node, g] -= pod.gpu_milli

    def used_milli(self) -> int:
        idle = self.gpu_idle
        return int(self.capacity_gpus * MILLI - idle[idle >= 0].sum())


Policy = Callable[[Cluster, TracePod, npt.NDArray[np.bool_], np.random.Generator], Choice]
"""Given the cluster, the pod and the feasible nodes (at least one), where it goes."""
PolicyMaker = Callable[[Sequence[TracePod]], Policy]
"""A policy for a workload (the pod list: policies that expect its mix learn it there)."""


def fragmented_milli(cluster: Cluster, profile: Profile) -> int:
    """Idle GPU milli the workload's pods can no longer use: on each node, what is idle
    beyond the profile-weighted room (:mod:`gangway.scheduling.packing`) — GPUs short of CPU or
    memory, slivers no shape fits, models no shape accepts."""
    if not profile.shapes:
        return 0
    idle = int(np.maximum(cluster.gpu_idle, 0).sum())
    return max(0, round(idle - float(Packer(profile, cluster).room().sum())))


@dataclass
class Outcome:
    arrived: list[int] = field(default_factory=list)
    """GPU milli requested by every pod attempted so far, after each attempt."""
    used: list[int] = field(default_factory=list)
    """GPU milli allocated in the cluster, after each attempt."""
    failed: int = 0
    failed_gpu_pods: int = 0
    fragmented: dict[int, int] = field(default_factory=dict)
    """Arrived % → fragmented GPU milli (:func:`fragmented_milli`) when arrivals first
    reached it; absent where they never did."""


def replay(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: Policy,
    *,
    seed: int,
    profile: Profile | None = None,
    marks: Sequence[int] = (),
    progress: Callable[[int], None] | None = None,
) -> tuple[Outcome, Cluster]:
    """Place ``pods`` in order with ``policy`` (ties broken with a generator seeded by
    ``seed``); the outcome after every attempt, and the cluster at the end. With ``profile``,
    the fragmented GPU capacity is recorded when arrivals reach each of ``marks`` (% of
    capacity); ``progress`` is told how many attempts were made, now and then."""
    cluster = Cluster.of(nodes)
    rng = np.random.default_rng(seed)
    out = Outcome()
    arrived = used = 0
    pending = sorted(marks) if profile is not None else []
    mix = profile or Profile((), ())
    scale = cluster.capacity_gpus * MILLI
    for i, pod in enumerate(pods, 1):
        arrived += pod.total_milli
        ok = cluster.feasible(pod)
        if ok.any():
            choice = policy(cluster, pod, ok, rng)
            cluster.place(pod, choice.node, choice.gpus)
            used += pod.total_milli
        else:
            out.failed += 1
            out.failed_gpu_pods += 1 if pod.num_gpu else 0
        out.arrived.append(arrived)
        out.used.append(used)
        while pending and arrived * 100 >= pending[0] * scale:
            out.fragmented[pending.pop(0)] = fragmented_milli(cluster, mix)
        if progress is not None and i % 500 == 0:
            progress(500)
    if progress is not None:
        progress(len(pods) % 500)
    return out, cluster


def allocation_curve(out: Outcome, capacity_gpus: int, top: int = 130) -> list[float]:
    """GPU allocation % at each arrived-demand % 0..``top``: the mean allocation over the
    attempts whose arrived % rounds (half to even) to it; where none does, over its
    neighbours (k−1..k+1), as the method reads it. Where a large pod jumps past several
    points, the allocation before the jump holds there (nothing changes between attempts);
    NaN only past the last arrival."""
    scale = capacity_gpus * 10  # milli → percent of capacity
    arrived = np.array(out.arrived, dtype=np.float64) / scale
    arrived_pct = np.rint(arrived).astype(np.int64)
    alloc_pct = np.round(np.array(out.used, dtype=np.float64) / scale, 2)
    sums = np.bincount(arrived_pct, weights=alloc_pct, minlength=top + 2)[: top + 2]
    counts = np.bincount(arrived_pct, minlength=top + 2)[: top + 2]
    reached = float(arrived[-1]) if len(arrived) else 0.0
    curve = []
    for k in range(top + 1):
        if counts[k]:
            curve.append(float(sums[k] / counts[k]))
            continue
        lo, hi = max(k - 1, 0), k + 2
        n = counts[lo:hi].sum()
        if n:
            curve.append(float(sums[lo:hi].sum() / n))
        elif k <= reached:
            before = int(np.searchsorted(arrived, k, side="right"))  # attempts at or below k
            curve.append(float(alloc_pct[before - 1]) if before else 0.0)
        else:
            curve.append(float("nan"))
    return curve
