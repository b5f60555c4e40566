"""A seed's arrival order (the method's workload): the pods sorted by name and shuffled, then
copies drawn uniformly (with replacement) from the name-sorted list until the GPU demand
would pass ``tune`` × the cluster's GPU capacity."""

from __future__ import annotations

import random
from collections.abc import Sequence

from gangway.scheduling.simulation.trace import MILLI, TracePod

__all__ = ["arrivals"]


def arrivals(
    pods: Sequence[TracePod], *, seed: int, capacity_gpus: int, tune: float = 1.3
) -> list[TracePod]:
    """The pods in arrival order for ``seed``: the shuffled originals, then the copies.

    Demand D starts at the originals' GPU milli; target T = ``tune`` × capacity. A drawn pod
    stops the drawing when D plus its *per-GPU* milli would pass T; else it is appended and
    its *total* milli added — exactly as the method's code does.
    """
    rng = random.Random(seed)
    ordered = sorted(pods, key=lambda p: p.name)
    shuffled = list(ordered)
    rng.shuffle(shuffled)
    demand = sum(p.total_milli for p in ordered)
    target = tune * capacity_gpus * MILLI
    extra: list[TracePod] = []
    while True:
        pod = ordered[rng.randrange(len(ordered))]
        if demand + pod.gpu_milli > target:
            break
        extra.append(pod)
        demand += pod.total_milli
    return shuffled + extra
