"""Node-choosing policies for the trace replay: the method's two baselines exactly as it defines
them, Gangway's own packing rule, and a re-implementation of FGD for comparison.

* **random**: uniform among the feasible nodes; a shared pod's GPU uniform among those that
  fit.
* **bestfit**: s = 0.5 × (CPU left − CPU request) / 128000 + 0.5 × (idle GPU milli on the node −
  GPU request) / 8000 — fixed constants, not the node's capacity; score = ⌊(1 − s) × 100⌋,
  highest wins, ties uniformly at random (the truncation makes ties common, and it matters);
  a shared pod takes the least-idle GPU that still fits.
* **gangway**: :class:`gangway.scheduling.packing.Packer` — the rule
:func:`gangway.scheduling.capacity.assign`
  orders nodes by — with the workload's own mix of pod shapes as its profile.
* **fgd**: :mod:`gangway.scheduling.simulation.fgd`.

Whole-GPU pods take completely free GPUs, lowest index first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gangway.scheduling.packing import MILLI, Packer, Profile
from gangway.scheduling.simulation.fgd import Fgd
from gangway.scheduling.simulation.replay import Choice, Cluster, Policy, PolicyMaker
from gangway.scheduling.simulation.trace import TracePod

__all__ = ["POLICIES", "Gangway", "bestfit", "random_fit"]


def _gpus(
    cluster: Cluster, pod: TracePod, node: int, rng: np.random.Generator, *, tight: bool
) -> tuple[int, ...]:
    idle = cluster.gpu_idle[node]
    if pod.num_gpu == 0:
        return ()
    if pod.num_gpu > 1 or pod.gpu_milli >= MILLI:
        free = np.flatnonzero(idle == MILLI)
        return tuple(int(g) for g in free[: pod.num_gpu])
    fits = np.flatnonzero(idle >= pod.gpu_milli)
    if tight:
        return (int(fits[np.argmin(idle[fits])]),)
    return (int(rng.choice(fits)),)


def random_fit(
    cluster: Cluster, pod: TracePod, ok: npt.NDArray[np.bool_], rng: np.random.Generator
) -> Choice:
    node = int(rng.choice(np.flatnonzero(ok)))
    return Choice(node, _gpus(cluster, pod, node, rng, tight=False))


def bestfit(
    cluster: Cluster, pod: TracePod, ok: npt.NDArray[np.bool_], rng: np.random.Generator
) -> Choice:
    nodes = np.flatnonzero(ok)
    idle = np.where(cluster.gpu_idle[nodes] > 0, cluster.gpu_idle[nodes], 0).sum(axis=1)
    s = 0.5 * (cluster.cpu[nodes] - pod.cpu_milli) / 128000 + 0.5 * (idle - pod.total_milli) / 8000
    score = np.floor((1 - s) * 100)
    best = nodes[score == score.max()]
    node = int(rng.choice(best))
    return Choice(node, _gpus(cluster, pod, node, rng, tight=True))


class Gangway:
    """Gangway's packing rule, its profile the workload's own mix of pod shapes."""

    def __init__(self, pods: Sequence[TracePod]) -> None:
        self.profile = Profile.of(p.shape for p in pods)
        self._packer: Packer | None = None

    def __call__(
        self, cluster: Cluster, pod: TracePod, ok: npt.NDArray[np.bool_], _: np.random.Generator
    ) -> Choice:
        if self._packer is None or self._packer.nodes is not cluster:
            self._packer = Packer(self.profile, cluster)
        return self._packer.choose(pod.shape, np.flatnonzero(ok))


def _fixed(policy: Policy) -> PolicyMaker:
    return lambda _pods: policy


POLICIES: dict[str, PolicyMaker] = {
    "random": _fixed(random_fit),
    "bestfit": _fixed(bestfit),
    "gangway": Gangway,
    "fgd": Fgd,
}
