"""Variants of a trace's pod list, made the way the FGD paper's trace family varies the default
one — more or fewer GPU-sharing pods, more multi-GPU demand, GPU-model constraints, more or
fewer CPU-only pods — so that Gangway's rule is measured on workloads it was never tuned on.

Each is seeded and deterministic; none is one of the published files (those are in shared/
and are measured as they are).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
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


ARTIFACT_SPECS: dict[str, int] = {
    "T4": 106,
    "G2": 35,
    "V100M16|V100M32": 25,
    "P100": 16,
    "G3": 10,
    "P100|V100M16|V100M32": 10,
    "G2|P100|T4|V100M16|V100M32": 4,
    "P100|T4|V100M16|V100M32": 2,
    "A10|G2|T4|V100M16|V100M32": 2,
    "A10|T4": 1,
    "P100|V100M16": 1,
}
"""The ``gpu_spec`` values of 212 constrained GPU pods read in the FGD artifact's own files
(alibaba/clusterdata ``cluster-trace-gpu-v2023/csv/openb_pod_list_gpuspec{10,25,33}.csv``, rows
0000–0220 of each and 5552–5776 of gpuspec33), counted: 79 % name one model, 13 % two, 5 %
three, 1 % four, 3 % five; half name T4 alone, which has 14 % of the trace's GPUs (and a third
of its nodes), while G2, with 71 % of the GPUs, is named alone by 17 %. Two specs that repeat
a model (``V100M16|V100M32|V100M32``) are counted as the set they name."""


def _able(pod: TracePod, nodes: Sequence[TraceNode]) -> Counter[str]:
    """Nodes, by GPU model, that could ever hold ``pod`` (GPUs, CPU and memory)."""
    return Counter(
        n.model
        for n in nodes
        if n.gpus >= pod.num_gpu and n.cpu_milli >= pod.cpu_milli and n.memory_mib >= pod.memory_mib
    )


def gpuspec(
    pods: Sequence[TracePod],
    share: float,
    rng: random.Random,
    nodes: Sequence[TraceNode],
    specs: Mapping[str, int] = ARTIFACT_SPECS,
) -> Pods:
    """``share`` of the GPU pods (by count, drawn without replacement) accept only the GPU
    models of a spec drawn, by how often the FGD artifact's files name it
    (:data:`ARTIFACT_SPECS`), among the specs naming a model with a node that could ever hold
    the pod. That is how the artifact's gpuspec files are made, as far as they show: the pods
    of the default list, about NN % of the GPU pods of ``gpuspecNN`` constrained (31 % of the
    gpuspec33 GPU pods read, 24 % of gpuspec25's first 211, 16 % of gpuspec10's; the files'
    sizes put the whole at 11, 19, 26 and 33 % for gpuspec10, 20, 25 and 33), the constrained
    pods and their specs drawn anew for each file, and the specs far from the cluster's GPU
    mix: half pin T4, so that at 33 % the pods pinned to T4 alone ask for more GPUs than it
    has. On a node list with none of those models, the spec is one model drawn by node count
    among those that could hold the pod."""
    out = list(pods)
    sets = [(frozenset(spec.split("|")), n) for spec, n in specs.items()]
    gpu = [i for i, p in enumerate(out) if p.num_gpu]
    for i in rng.sample(gpu, round(share * len(gpu))):
        able = _able(out[i], nodes)
        fit = [(models, n) for models, n in sets if models & able.keys()]
        if fit:
            models = rng.choices([m for m, _ in fit], weights=[n for _, n in fit])[0]
        elif able:
            names = sorted(able)
            models = frozenset(rng.choices(names, weights=[able[m] for m in names]))
        else:
            continue
        out[i] = replace(out[i], models=models)
    return out


def gpupin(
    pods: Sequence[TracePod], share: float, rng: random.Random, nodes: Sequence[TraceNode]
) -> Pods:
    """``share`` of the GPU pods accept one GPU model only, drawn by node count among the
    models with a node that could ever hold the pod: a mix unlike the artifact's (G2, the
    model with most nodes, is pinned most), to check that Gangway's rule was not fitted to it."""
    return gpuspec(pods, share, rng, nodes, specs={})


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
    "gpuspec10": lambda p, r, n: gpuspec(p, 0.10, r, n),
    "gpuspec20": lambda p, r, n: gpuspec(p, 0.20, r, n),
    "gpuspec25": lambda p, r, n: gpuspec(p, 0.25, r, n),
    "gpuspec33": lambda p, r, n: gpuspec(p, 0.33, r, n),
    "gpuspec50": lambda p, r, n: gpuspec(p, 0.50, r, n),
    "gpupin33": lambda p, r, n: gpupin(p, 0.33, r, n),
    "cpu050": lambda p, r, _: cpu_pods(p, 0.5, r),
    "cpu200": lambda p, r, _: cpu_pods(p, 2.0, r),
}


def variant(name: str, pods: Sequence[TracePod], nodes: Sequence[TraceNode]) -> Pods:
    """The named variant of ``pods`` (seeded by its name: the same every time)."""
    return VARIANTS[name](sorted(pods, key=lambda p: p.name), random.Random(name), nodes)
