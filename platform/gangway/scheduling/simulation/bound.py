"""How much GPU allocation any placement could reach: an upper bound, for judging how far a
policy is from what is possible rather than from 100 %.

At the moment the arrived GPU demand equals the capacity, the pods that arrived so far are
packed offline, as well as possible, with everything relaxed but the GPUs themselves: CPU,
memory, GPU models and node boundaries are ignored, and so is the order of arrival. What is
left is how the per-GPU shares fit into whole GPUs — a cutting-stock problem, whose linear
relaxation is solved exactly by column generation (Gilmore–Gomory): a GPU *pattern* is a
multiset of shares that fit in 1000 milli; the master LP chooses how many GPUs take each
pattern, and a knapsack over the duals finds the next pattern worth adding. A whole-GPU
request is the pattern of one 1000-milli item per GPU.

No online policy can exceed the bound; it is not always reachable (it ignores the
constraints above), so the gap to it is an upper estimate of what a better rule could win.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gangway.scheduling.packing import MILLI
from gangway.scheduling.simulation.trace import TracePod

__all__ = ["allocation_bound", "pods_until"]


def pods_until(arriving: Sequence[TracePod], capacity_gpus: int, pct: int = 100) -> list[TracePod]:
    """The arrivals up to the one that brings the GPU demand to ``pct`` % of the capacity."""
    out, demand = [], 0
    for pod in arriving:
        out.append(pod)
        demand += pod.total_milli
        if demand * 100 >= pct * capacity_gpus * MILLI:
            break
    return out


def allocation_bound(pods: Sequence[TracePod], capacity_gpus: int) -> float:
    """The most GPU milli that ``pods`` could hold on ``capacity_gpus`` GPUs, as % of the
    capacity (the LP relaxation of packing their shares; see the module's text)."""
    from scipy.optimize import linprog

    items: Counter[int] = Counter()
    for p in pods:
        if p.num_gpu:
            items[p.gpu_milli if p.gpu_milli < MILLI else MILLI] += p.num_gpu
    if not items or not capacity_gpus:
        return 0.0
    sizes = sorted(items)
    width = np.array(sizes, dtype=np.float64)
    counts = np.array([items[s] for s in sizes], dtype=np.float64)
    patterns = list(np.eye(len(sizes)))  # one item per GPU: always feasible
    while True:
        a = np.array(patterns).T  # items × patterns
        lp = linprog(
            -(width @ a),
            A_ub=np.vstack([np.ones(a.shape[1]), a]),
            b_ub=np.concatenate([[capacity_gpus], counts]),
            bounds=(0, None),
            method="highs",
        )
        duals = -lp.ineqlin.marginals
        value, pattern = _best_pattern(sizes, width - duals[1:])
        if value <= duals[0] + 1e-7 * MILLI:
            return float(-lp.fun) / (capacity_gpus * MILLI) * 100
        patterns.append(pattern)


def _best_pattern(
    sizes: list[int], profit: npt.NDArray[np.float64]
) -> tuple[float, npt.NDArray[np.float64]]:
    """The multiset of shares fitting in one GPU with the most ``profit`` (an unbounded
    knapsack in units of the shares' common divisor)."""
    unit = math.gcd(MILLI, *sizes)
    room = MILLI // unit
    best = np.zeros(room + 1)
    last = [-1] * (room + 1)
    for c in range(1, room + 1):
        best[c], last[c] = best[c - 1], -1
        for i, s in enumerate(sizes):
            u = s // unit
            if u <= c and profit[i] > 0 and best[c - u] + profit[i] > best[c] + 1e-12:
                best[c], last[c] = best[c - u] + profit[i], i
    pattern = np.zeros(len(sizes))
    c = room
    while c > 0:
        if last[c] < 0:
            c -= 1
            continue
        pattern[last[c]] += 1
        c -= sizes[last[c]] // unit
    return float(best[room]), pattern
