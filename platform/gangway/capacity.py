"""A cluster's capacity as arrays, and where a whole gang fits in it.

:class:`ClusterView` holds, per node, what is allocatable and what is free (numpy arrays, so a
decision over 12,000 nodes stays in milliseconds), each node's domain at every topology tier,
and each queue's usage. :func:`fit` answers, for one pod shape, how many pods each node can
take; :func:`assign` picks the topology domain and the nodes for a whole gang:

1. **One domain, closest tier first** — a rack before a block before the whole cluster (fewest
   hops between the gang's pods; Volcano's network-topology-aware plugin scores the same way).
2. **Best fit among the domains that fit** — the one left with the fewest free pod slots, so
   large free domains stay whole for large gangs (less fragmentation); ties by name.
3. **Nodes with the most room first**, then the least left over, so the gang spans few nodes.

A gang is never split across what does not fit it whole: :func:`assign` returns None instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangway.snapshot.model import Amount, ClusterState, Gang, quota_key

__all__ = ["Assignment", "ClusterView", "assign", "fit", "quota_keys"]

Ints = npt.NDArray[np.int64]
UNLIMITED = np.int64(1 << 40)


def quota_keys(gpu_type: str | None, gpus: int) -> tuple[str, ...]:
    """The quota keys a pod shape counts against."""
    keys: tuple[str, ...] = ("cpu", "memory")
    if gpus:
        keys += ("gpu",) + ((quota_key(gpu_type),) if gpu_type else ())
    return keys


@dataclass
class ClusterView:
    """One cluster's nodes and queues, ready for decisions; :meth:`hold` and :meth:`release`
    change it as gangs start and stop (the simulator and the benchmark do)."""

    name: str
    state: ClusterState
    nodes: list[str]
    allocatable: Ints
    """(n, 3): CPU millicores, memory bytes, GPUs."""
    free: Ints
    gpu_type: npt.NDArray[np.int32]
    types: dict[str | None, int]
    domains: list[npt.NDArray[np.int32]]
    """Per tier (closest first): each node's domain index."""
    domain_names: list[list[str]]
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    """Queue → quota key → what its running gangs (and its descendants') hold."""

    @classmethod
    def of(cls, name: str, state: ClusterState) -> ClusterView:
        n = len(state.nodes)
        alloc = np.zeros((n, 3), dtype=np.int64)
        used = np.zeros((n, 3), dtype=np.int64)
        types: dict[str | None, int] = {None: 0}
        codes = np.zeros(n, dtype=np.int32)
        for i, node in enumerate(state.nodes):
            a, u = node.allocatable, node.allocated
            if node.schedulable:
                alloc[i] = (a.cpu, a.memory, a.gpus)
            used[i] = (u.cpu, u.memory, u.gpus)
            codes[i] = types.setdefault(node.gpu_type, len(types))
        domains, names = [], []
        for tier in state.tiers:
            index: dict[str, int] = {}
            ids = np.array(
                [
                    index.setdefault(nd.domains.get(tier, f"(node {nd.name})"), len(index))
                    for nd in state.nodes
                ],
                dtype=np.int32,
            )
            domains.append(ids)
            names.append(list(index))
        view = cls(
            name=name,
            state=state,
            nodes=[nd.name for nd in state.nodes],
            allocatable=alloc,
            free=np.maximum(alloc - used, 0),
            gpu_type=codes,
            types=types,
            domains=domains,
            domain_names=names,
        )
        for g in state.gangs:
            if g.phase == "Running":
                view._count(g, +1)
        return view

    def _count(self, gang: Gang, sign: int) -> None:
        for q in self.state.ancestors(gang.queue):
            used = self.usage.setdefault(q, {})
            for key in quota_keys(gang.gpu_type, gang.per_pod.gpus):
                used[key] = used.get(key, 0) + sign * gang.total(key)

    def used(self, queue: str, key: str) -> int:
        return self.usage.get(queue, {}).get(key, 0)

    def hold(self, gang: Gang, placement: dict[int, int]) -> None:
        """Gang ``gang`` starts with ``placement`` (node index → pods)."""
        self._move(gang, placement, -1)

    def release(self, gang: Gang, placement: dict[int, int]) -> None:
        """Gang ``gang`` stops: its nodes and quota are free again."""
        self._move(gang, placement, +1)

    def _move(self, gang: Gang, placement: dict[int, int], sign: int) -> None:
        p = gang.per_pod
        for i, k in placement.items():
            self.free[i] += sign * k * np.array((p.cpu, p.memory, p.gpus), dtype=np.int64)
        self._count(gang, -sign)

    def node_index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.nodes)}

    def has_type(self, gpu_type: str | None) -> bool:
        return gpu_type in self.types


def fit(
    view: ClusterView, per_pod: Amount, gpu_type: str | None, *, free: Ints | None = None
) -> Ints:
    """How many pods of shape ``per_pod`` each node can take now (``free``, default the
    view's) — only nodes of ``gpu_type`` when the pod wants GPUs of a given type."""
    room = view.free if free is None else free
    want = np.array((per_pod.cpu, per_pod.memory, per_pod.gpus), dtype=np.int64)
    with np.errstate(divide="ignore"):
        per = np.where(want > 0, room // np.maximum(want, 1), UNLIMITED)
    counts: Ints = per.min(axis=1)
    if per_pod.gpus and gpu_type is not None:
        code = view.types.get(gpu_type)
        counts = np.where(view.gpu_type == code, counts, 0) if code is not None else counts * 0
    return counts


@dataclass(frozen=True)
class Assignment:
    """Where a whole gang goes in one cluster."""

    tier: str | None
    """The tier whose one domain holds the gang; None: it spans the cluster."""
    domain: str | None
    nodes: dict[int, int]
    """Node index → pods."""
    slots_left: int
    """Free pod slots of this shape left in the domain afterwards (fragmentation)."""

    def node_names(self, view: ClusterView) -> dict[str, int]:
        return {view.nodes[i]: k for i, k in sorted(self.nodes.items())}


def _fill(counts: Ints, order: Ints, pods: int) -> dict[int, int]:
    """Pods onto nodes in ``order``, each taking what it can, until the gang is placed."""
    out: dict[int, int] = {}
    left = pods
    for i in order:
        if left <= 0:
            break
        k = int(min(counts[i], left))
        if k > 0:
            out[int(i)] = k
            left -= k
    return out


def assign(
    view: ClusterView, counts: Ints, pods: int, *, within: str | None = None
) -> Assignment | None:
    """The domain and nodes for ``pods`` pods, given ``counts`` (:func:`fit`); None when no
    domain at ``within`` or a closer tier (anywhere in the cluster when None) can take them."""
    tiers = view.state.tiers
    allowed = len(tiers) if within is None else tiers.index(within) + 1
    for t in range(allowed):
        ids = view.domains[t]
        cap = np.bincount(ids, weights=counts, minlength=len(view.domain_names[t]))
        left = np.where(cap >= pods, cap - pods, np.inf)
        best = int(np.argmin(left))
        if np.isfinite(left[best]):
            members = np.flatnonzero((ids == best) & (counts > 0))
            order = members[np.lexsort((members, -counts[members]))]
            name = view.domain_names[t][best]
            return Assignment(tiers[t], name, _fill(counts, order, pods), int(left[best]))
    if within is not None or int(counts.sum()) < pods:
        return None
    members = np.flatnonzero(counts > 0)
    keys: tuple[Ints, ...] = (members, -counts[members])
    if tiers:  # the widest domains with the most room first: the gang spans the fewest
        top = view.domains[-1]
        keys += (-np.bincount(top, weights=counts)[top[members]].astype(np.int64),)
    order = members[np.lexsort(keys)]
    return Assignment(None, None, _fill(counts, order, pods), int(counts.sum()) - pods)
