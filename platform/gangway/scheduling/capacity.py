"""A cluster's capacity as arrays, and where a whole gang fits in it.

:class:`ClusterView` holds, per node, what is allocatable and what is free (numpy arrays, so a
decision over 12,000 nodes stays in milliseconds), each node's domain at every topology tier,
and each queue's usage. :func:`fit` answers, for one pod shape, how many pods each node can
take; :func:`assign` picks the topology domain and the nodes for a whole gang:

1. **One domain, closest tier first** — a rack before a block before the whole cluster (fewest
   hops between the gang's pods; Volcano's network-topology-aware plugin scores the same way).
2. **Best fit among the domains that fit** — the one left with the fewest free pod slots, so
   large free domains stay whole for large gangs (less fragmentation); ties by the order the
   domains first appear in the snapshot's node list.
3. **Nodes that lose the least room first** — :mod:`gangway.scheduling.packing`'s loss for one pod
of
   the gang, with the cluster's gangs as the profile of what comes next — then the nodes with
   the most room (so the gang spans few nodes), then node order; a gang no domain holds fills
   the widest domains with the most room first, one at a time.

A gang is never split across what does not fit it whole: :func:`assign` returns None instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gangway.scheduling.packing import (
    LOSS_STEP,
    MILLI,
    Columns,
    Nodes,
    Packer,
    Profile,
    Shape,
    access_of,
)
from gangway.scheduling.snapshot.cluster_state import (
    Amount,
    ClusterState,
    Gang,
    QueueState,
    Snapshot,
)
from gangway.units import VOLCANO_KEYS, quota_keys

__all__ = [
    "Assignment",
    "ClusterView",
    "SnapshotView",
    "add_request",
    "assign",
    "deserved_share",
    "fill",
    "fit",
    "pod_shape",
    "view_of",
]

Ints = npt.NDArray[np.int64]
UNLIMITED = np.int64(1 << 40)
MIB = 2**20
EXACT = 2**24 - 1


def pod_shape(per_pod: Amount, gpu_type: str | None) -> Shape:
    """One pod of a gang as :mod:`gangway.scheduling.packing` reads it: memory in MiB (rounded up),
    whole GPUs, its GPU model."""
    return Shape(
        cpu=min(per_pod.cpu, EXACT),
        memory=min(-(-per_pod.memory // MIB), EXACT),
        gpus=per_pod.gpus,
        gpu_milli=MILLI if per_pod.gpus else 0,
        models=frozenset({gpu_type}) if gpu_type and per_pod.gpus else frozenset(),
    )


def add_request(into: dict[str, int], gang: Gang, sign: int = 1) -> None:
    """Add (``sign`` −1: take away) what ``gang`` requests, key by key, to ``into``."""
    for key in quota_keys(gang.gpu_type, gang.per_pod.gpus):
        into[key] = into.get(key, 0) + sign * gang.total(key)


def deserved_share(q: QueueState) -> dict[str, int]:
    """A queue's deserved share as Volcano's capacity plugin holds it: each of cpu, memory and
    gpu it sets, raised to its guarantee (``helpers.Max(deserved, guarantee)``); a resource it
    sets neither of is absent (0)."""
    out = {}
    for k in VOLCANO_KEYS:
        share = max(q.deserved.get(k, 0), q.guarantee.get(k, 0))
        if share > 0:
            out[k] = share
    return out


class Watcher(Protocol):
    """Something kept from a view's running gangs (:meth:`ClusterView.watch`), told of each
    gang that starts or stops instead of being rebuilt."""

    def started(self, gang: Gang) -> None: ...

    def stopped(self, gang: Gang) -> None: ...


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
    gangs: dict[str, Gang] = field(default_factory=dict)
    """Every gang by name, running or pending; :meth:`hold` and :meth:`release` keep it
    current."""
    pending: dict[str, int] = field(default_factory=dict)
    """Queue → how many of its gangs are pending."""
    running: dict[str, dict[int, dict[str, Gang]]] = field(default_factory=dict)
    """Queue → priority → its running gangs of that priority by name (preemption's
    candidates, lowest priority first)."""
    index: dict[str, int] = field(default_factory=dict)
    """Node name → its row."""
    _tree: dict[str, tuple[list[str], set[str]]] = field(default_factory=dict)
    _ever: dict[tuple[int, int, int, str | None, str | None, int], Assignment | None] = field(
        default_factory=dict
    )
    _rows: dict[str, tuple[Ints, Ints]] = field(default_factory=dict)
    _caps: dict[tuple[str, tuple[str, ...]], list[tuple[str, str, int]]] = field(
        default_factory=dict
    )
    _deserved: dict[str, dict[str, int]] = field(default_factory=dict)
    _masks: dict[tuple[int, int, int, str | None], npt.NDArray[np.bool_]] = field(
        default_factory=dict
    )
    _profile: Profile | None = None
    _packing: tuple[Columns, npt.NDArray[np.float32] | None] | None = None
    _losses: dict[Shape, dict[tuple[int, int, int, int, int], int]] = field(default_factory=dict)
    _memo: dict[object, object] = field(default_factory=dict)
    _watchers: dict[str, Watcher] = field(default_factory=dict)

    def memo(self, key: object, build: Callable[[], object]) -> object:
        """What ``build`` makes from the view as it is (kept until a gang starts or stops)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def watch(self, key: str, build: Callable[[], Watcher]) -> Watcher:
        """What ``build`` makes from the view's running gangs, kept from then on: :meth:`hold`
        and :meth:`release` tell it of each gang that starts or stops."""
        hit = self._watchers.get(key)
        if hit is None:
            hit = self._watchers[key] = build()
        return hit

    def ancestors(self, queue: str) -> list[str]:
        """``queue`` and its parents below ``root`` (cached: the hierarchy does not change)."""
        return self._family(queue)[0]

    def subtree(self, queue: str) -> set[str]:
        """``queue`` and every queue below it (cached)."""
        return self._family(queue)[1]

    def _family(self, queue: str) -> tuple[list[str], set[str]]:
        hit = self._tree.get(queue)
        if hit is None:
            hit = self._tree[queue] = (self.state.ancestors(queue), self.state.subtree(queue))
        return hit

    def deserved(self, queue: str) -> dict[str, int]:
        """``queue``'s deserved share as Volcano's capacity plugin holds it
        (:func:`deserved_share`; cached: quotas do not change)."""
        hit = self._deserved.get(queue)
        if hit is None:
            hit = self._deserved[queue] = deserved_share(self.state.queues[queue])
        return hit

    def capabilities(self, queue: str, keys: tuple[str, ...]) -> list[tuple[str, str, int]]:
        """``(queue, key, capability)`` of ``queue`` and its parents for ``keys`` that have
        one (cached: quotas do not change)."""
        hit = self._caps.get((queue, keys))
        if hit is None:
            hit = self._caps[(queue, keys)] = [
                (q, k, cap)
                for q in self.ancestors(queue)
                for k in keys
                if (cap := self.state.queues[q].capability.get(k)) is not None
            ]
        return hit

    def profile(self) -> Profile:
        """The pods expected next: the snapshot's gangs, each pod once (cached)."""
        if self._profile is None:
            weights: dict[Shape, float] = {}
            for g in self.state.gangs:
                shape = pod_shape(g.per_pod, g.gpu_type)
                weights[shape] = weights.get(shape, 0.0) + g.pods
            self._profile = Profile.weighted(weights)
        return self._profile

    def expect(self, profile: Profile) -> None:
        """The pods expected next are ``profile``, not the snapshot's gangs (a simulation
        knows its workload's mix); what was computed from the old profile is dropped."""
        self._profile, self._packing = profile, None
        self._losses.clear()

    def packing_loss(self, rows: Ints, pod: Shape, free: Ints | None = None) -> Ints | None:
        """:mod:`gangway.scheduling.packing`'s loss (in steps) of one ``pod`` on each of ``rows``
        with ``free`` (default: what is free now); None when the profile is empty. A node's
        loss depends only on its own free and allocatable capacity and model, so it is kept per
        such node state: a busy fleet has few distinct ones."""
        profile = self.profile()
        if not profile.shapes:
            return None
        room = (self.free if free is None else free)[rows]
        keys = list(
            zip(
                room[:, 0].tolist(),
                room[:, 1].tolist(),
                room[:, 2].tolist(),
                self.allocatable[rows, 2].tolist(),
                self.gpu_type[rows].tolist(),
                strict=True,
            )
        )
        known = self._losses.setdefault(pod, {})
        missing = [i for i, k in enumerate(keys) if k not in known]
        if missing:
            fresh = self._losses_of(rows[missing], room[missing], pod)
            for i, loss in zip(missing, fresh.tolist(), strict=True):
                known[keys[i]] = loss
        steps: Ints = np.array([known[k] for k in keys], dtype=np.int64)
        return steps

    def _losses_of(self, rows: Ints, room: Ints, pod: Shape) -> Ints:
        profile = self.profile()
        alloc = self.allocatable[rows, 2]
        slot = np.arange(max(int(alloc.max(initial=0)), 1))
        idle = np.where(slot < room[:, 2:3], MILLI, np.where(slot < alloc[:, None], 0, -1))
        nodes = Nodes(
            cpu=np.minimum(room[:, 0], EXACT),
            memory=np.minimum(room[:, 1] // MIB, EXACT),
            gpu_idle=idle.astype(np.int64),
            model=self.gpu_type[rows],
            models=self.types,
        )
        if self._packing is None:  # the profile's columns, and which nodes each shape takes
            every = Nodes(nodes.cpu[:0], nodes.memory[:0], idle[:0], self.gpu_type, self.types)
            self._packing = (Columns.of(profile), access_of(profile, every))
        columns, access = self._packing
        packer = Packer(profile, nodes, None if access is None else access[rows], arrays=columns)
        _, _, loss, _ = packer.losses(pod, np.arange(len(rows)))
        steps: Ints = np.floor(loss / LOSS_STEP).astype(np.int64)
        return steps

    def ever(
        self, per_pod: Amount, gpu_type: str | None, pods: int, within: str | None
    ) -> Assignment | None:
        """Where the gang would go on an empty cluster (cached: allocatable does not change)."""
        key = (per_pod.cpu, per_pod.memory, per_pod.gpus, gpu_type, within, pods)
        if key not in self._ever:
            counts = fit(self, per_pod, gpu_type, free=self.allocatable)
            pod = pod_shape(per_pod, gpu_type)
            self._ever[key] = assign(
                self, counts, pods, within=within, pod=pod, free=self.allocatable
            )
        return self._ever[key]

    def ever_mask(self, per_pod: Amount, gpu_type: str | None) -> npt.NDArray[np.bool_]:
        """The nodes a pod of this shape could ever run on (cached: allocatable does not
        change)."""
        key = (per_pod.cpu, per_pod.memory, per_pod.gpus, gpu_type)
        hit = self._masks.get(key)
        if hit is None:
            hit = self._masks[key] = fit(self, per_pod, gpu_type, free=self.allocatable) > 0
        return hit

    def rows(self, gang: Gang) -> tuple[Ints, Ints]:
        """A running gang's node rows and what it holds on each: (rows, (k, 3) amounts)."""
        hit = self._rows.get(gang.key)
        if hit is None or len(hit[0]) != len(gang.placement):
            idx = np.array(
                [self.index[n] for n in gang.placement if n in self.index], dtype=np.int64
            )
            k = np.array([c for n, c in gang.placement.items() if n in self.index], dtype=np.int64)
            p = gang.per_pod
            shape = np.array((p.cpu, p.memory, p.gpus), dtype=np.int64)
            hit = self._rows[gang.key] = (idx, k[:, None] * shape[None, :])
        return hit

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
            gangs={g.key: g for g in state.gangs},
        )
        view.index = {n: i for i, n in enumerate(view.nodes)}
        for g in state.gangs:
            if g.phase == "Running":
                view._count(g, +1)
                view._run(g)
            else:
                view.pending[g.queue] = view.pending.get(g.queue, 0) + 1
        return view

    def _count(self, gang: Gang, sign: int) -> None:
        for q in self.ancestors(gang.queue):
            add_request(self.usage.setdefault(q, {}), gang, sign)

    def used(self, queue: str, key: str) -> int:
        return self.usage.get(queue, {}).get(key, 0)

    def hold(self, gang: Gang, placement: dict[int, int]) -> Gang:
        """Gang ``gang`` starts with ``placement`` (node index → pods); the running gang."""
        running = gang.model_copy(
            update={
                "phase": "Running",
                "placement": {self.nodes[i]: k for i, k in placement.items()},
            }
        )
        self._rows.pop(gang.key, None)
        self._memo.clear()
        rows, amounts = self.rows(running)
        self.free[rows] -= amounts
        self._count(running, +1)
        before = self.gangs.get(gang.key)
        if before is not None and before.phase == "Pending":
            self.pending[gang.queue] -= 1
        self.gangs[gang.key] = running
        self._run(running)
        for w in self._watchers.values():
            if before is not None and before.phase == "Running":
                w.stopped(before)
            w.started(running)
        return running

    def _run(self, gang: Gang) -> None:
        self.running.setdefault(gang.queue, {}).setdefault(gang.priority, {})[gang.key] = gang

    def release(self, gang: Gang) -> None:
        """Running gang ``gang`` stops (finished or evicted): its nodes and quota are free."""
        current = self.gangs.get(gang.key)
        if current is None or current.phase != "Running":
            raise ValueError(f"{gang.key} is not running here: nothing to release")
        self.give_back(self.free, current)
        self._count(current, -1)
        for w in self._watchers.values():
            w.stopped(current)
        self._memo.clear()
        self.gangs.pop(gang.key, None)
        self._rows.pop(gang.key, None)
        self.running.get(gang.queue, {}).get(gang.priority, {}).pop(gang.key, None)

    def give_back(self, free: Ints, gang: Gang) -> None:
        """Add what running ``gang`` holds back onto ``free`` (the view's, or a copy being
        planned on) — never beyond a node's allocatable: a cordoned node gets nothing back."""
        rows, amounts = self.rows(gang)  # a gang's rows are distinct nodes
        free[rows] = np.minimum(free[rows] + amounts, self.allocatable[rows])

    def has_type(self, gpu_type: str | None) -> bool:
        return gpu_type in self.types


def fit(
    view: ClusterView,
    per_pod: Amount,
    gpu_type: str | None,
    *,
    free: Ints | None = None,
) -> Ints:
    """How many pods of shape ``per_pod`` each node can take now (``free``, default the
    view's) — only nodes of ``gpu_type`` when the pod wants GPUs of a given type."""
    room = view.free if free is None else free
    codes = view.gpu_type
    counts: Ints | None = None
    for col, want in enumerate((per_pod.cpu, per_pod.memory, per_pod.gpus)):
        if want > 0:
            c = room[:, col] // want
            counts = c if counts is None else np.minimum(counts, c)
    if counts is None:
        counts = np.full(len(room), UNLIMITED, dtype=np.int64)
    if per_pod.gpus and gpu_type is not None:
        code = view.types.get(gpu_type)
        counts = np.where(codes == code, counts, 0) if code is not None else counts * 0
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


def fill(counts: Ints, order: Ints, pods: int) -> dict[int, int]:
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
    view: ClusterView,
    counts: Ints,
    pods: int,
    *,
    within: str | None = None,
    pod: Shape | None = None,
    free: Ints | None = None,
) -> Assignment | None:
    """The domain and nodes for ``pods`` pods, given ``counts`` (:func:`fit` over ``free``,
    default what is free now); None when no domain at ``within`` or a closer tier (anywhere in
    the cluster when None) can take them. With ``pod`` (one pod of the gang), a domain's nodes
    are ordered by the packing loss first (see the module docstring)."""
    tiers = view.state.tiers
    allowed = len(tiers) if within is None else tiers.index(within) + 1
    for t in range(allowed):
        ids = view.domains[t]
        cap = np.bincount(ids, weights=counts, minlength=len(view.domain_names[t]))
        left = np.where(cap >= pods, cap - pods, np.inf)
        best = int(np.argmin(left))
        if np.isfinite(left[best]):
            members = np.flatnonzero((ids == best) & (counts > 0))
            keys: tuple[Ints, ...] = (members, -counts[members])
            loss = (
                None if pod is None or len(members) < 2 else view.packing_loss(members, pod, free)
            )
            order = members[np.lexsort(keys if loss is None else (*keys, loss))]
            name = view.domain_names[t][best]
            return Assignment(tiers[t], name, fill(counts, order, pods), int(left[best]))
    if within is not None or int(counts.sum()) < pods:
        return None
    members = np.flatnonzero(counts > 0)
    keys = (members, -counts[members])
    if tiers:  # the widest domains with the most room first, one whole domain at a time
        top = view.domains[-1]
        room = np.bincount(top, weights=counts)[top[members]].astype(np.int64)
        keys += (top[members].astype(np.int64), -room)
    order = members[np.lexsort(keys)]
    return Assignment(None, None, fill(counts, order, pods), int(counts.sum()) - pods)


@dataclass(frozen=True)
class SnapshotView:
    """A snapshot with each cluster as a :class:`ClusterView`, built once: what admission and
    placement read. A caller making several decisions over one snapshot builds it once
    (:func:`view_of`) and passes it to each; nothing is cached behind its back."""

    snapshot: Snapshot
    clusters: Mapping[str, ClusterView]


def view_of(snapshot: Snapshot | SnapshotView) -> SnapshotView:
    """``snapshot``'s view: the one given, or one built now."""
    if isinstance(snapshot, SnapshotView):
        return snapshot
    clusters = {name: ClusterView.of(name, c) for name, c in snapshot.clusters.items()}
    return SnapshotView(snapshot, clusters)
