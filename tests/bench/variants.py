"""Variants of a trace's pod list, made the way the FGD paper's trace family varies the default
one — more or fewer GPU-sharing pods, more multi-GPU demand, GPU-model constraints, more or
fewer CPU-only pods — so that Gangway's rule is measured on workloads it was never tuned on.

Each is seeded and deterministic; none is one of the published files (those are in shared/
and are measured as they are).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from gangway.scheduling.simulation.trace import TraceNode, TracePod

__all__ = ["VARIANTS", "variant"]

Pods = list[TracePod]


def _gpu_pods(pods: Sequence[TracePod]) -> Pods:
    return [p for p in pods if p.num_gpu]


def gpushare(pods: Sequence[TracePod], share: float, rng: random.Random) -> Pods:
    """``share`` of the GPU pods share a GPU: whole one-GPU pods become shared ones (their
    milli drawn from the shared pods'), or the other way round."""
    out = list(pods)
    milli = [p.gpu_milli for p in pods if p.num_gpu == 1 and p.gpu_milli < 1000]
    gpu = [i for i, p in enumerate(out) if p.num_gpu]
    shared = [i for i in gpu if out[i].gpu_milli < 1000]
    want = round(share * len(gpu))
    if want > len(shared):
        whole = [i for i in gpu if out[i].num_gpu == 1 and out[i].gpu_milli == 1000]
        for i in rng.sample(whole, min(len(whole), want - len(shared))):
            out[i] = replace(out[i], gpu_milli=rng.choice(milli))
    else:
        for i in rng.sample(shared, len(shared) - want):
            out[i] = replace(out[i], gpu_milli=1000)
    return out


def multigpu(pods: Sequence[TracePod], share: float, rng: random.Random) -> Pods:
    """Copies of the multi-GPU pods are added until they ask for ``share`` of the GPU milli."""
    out = list(pods)
    multi = [p for p in pods if p.num_gpu > 1]
    total = sum(p.total_milli for p in out)
    theirs = sum(p.total_milli for p in multi)
    n = 0
    while theirs < share * total:
        p = rng.choice(multi)
        out.append(replace(p, name=f"{p.name}-m{n}"))
        theirs += p.total_milli
        total += p.total_milli
        n += 1
    return out


def gpuspec(
    pods: Sequence[TracePod], share: float, rng: random.Random, nodes: Sequence[TraceNode]
) -> Pods:
    """``share`` of the GPU pods accept only one or two GPU models, drawn by GPU count among
    the models with a node that could ever hold the pod."""
    out = list(pods)
    gpu = [i for i, p in enumerate(out) if p.num_gpu]
    for i in rng.sample(gpu, round(share * len(gpu))):
        p = out[i]
        able: dict[str, int] = {}
        for n in nodes:
            if n.gpus >= p.num_gpu and n.cpu_milli >= p.cpu_milli and n.memory_mib >= p.memory_mib:
                able[n.model] = able.get(n.model, 0) + n.gpus
        models = list(able)
        picked = set(rng.choices(models, weights=[able[m] for m in models], k=rng.choice([1, 2])))
        out[i] = replace(p, models=frozenset(picked))
    return out


def cpu_pods(pods: Sequence[TracePod], ratio: float, rng: random.Random) -> Pods:
    """The CPU-only pods, ``ratio`` times as many (dropped at random, or copies added)."""
    cpu = [p for p in pods if not p.num_gpu]
    gpu = _gpu_pods(pods)
    want = round(ratio * len(cpu))
    if want <= len(cpu):
        return gpu + rng.sample(cpu, want)
    drawn = rng.choices(cpu, k=want - len(cpu))
    return gpu + cpu + [replace(p, name=f"{p.name}-c{n}") for n, p in enumerate(drawn)]


Maker = Callable[[Sequence[TracePod], random.Random, Sequence[TraceNode]], Pods]
VARIANTS: dict[str, Maker] = {
    "gpushare20": lambda p, r, _: gpushare(p, 0.2, r),
    "gpushare60": lambda p, r, _: gpushare(p, 0.6, r),
    "gpushare80": lambda p, r, _: gpushare(p, 0.8, r),
    "multigpu30": lambda p, r, _: multigpu(p, 0.3, r),
    "multigpu50": lambda p, r, _: multigpu(p, 0.5, r),
    "gpuspec10": lambda p, r, n: gpuspec(p, 0.1, r, n),
    "gpuspec25": lambda p, r, n: gpuspec(p, 0.25, r, n),
    "gpuspec33": lambda p, r, n: gpuspec(p, 0.33, r, n),
    "cpu050": lambda p, r, _: cpu_pods(p, 0.5, r),
    "cpu200": lambda p, r, _: cpu_pods(p, 2.0, r),
}


def variant(name: str, pods: Sequence[TracePod], nodes: Sequence[TraceNode]) -> Pods:
    """The named variant of ``pods`` (seeded by its name: the same every time)."""
    return VARIANTS[name](sorted(pods, key=lambda p: p.name), random.Random(name), nodes)
