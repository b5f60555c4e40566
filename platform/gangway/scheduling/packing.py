"""Packing: which node — and which GPUs on it — one pod should take, so that what stays free
stays usable by the pods expected next.

This is Gangway's own node-scoring rule. :func:`gangway.scheduling.capacity.assign` orders a gang's
nodes by it, and the trace simulator (``gangway simulate``, ``docs/simulation.md``) measures it
against the published results on a real GPU-cluster trace, so what is measured is what runs.

* A **profile** (:class:`Profile`) is the mix of pod shapes expected to arrive: CPU, memory,
  GPUs per pod, the share of each GPU it takes (1000 milli = a whole GPU) and the GPU models
  it accepts, each weighted by how often it comes. CPU-only shapes take no GPU room and are
  left out; the rarest shapes are kept — a rare large pod that only some nodes can hold is
  the one a careless placement makes fail.
* The **room** a node has for a shape: for a shared shape, the GPU milli copies of it could
  still take there — the fewest copies the node's CPU, memory or GPUs allow (⌊idle ÷ share⌋
  on each GPU), times its share; for a whole-GPU shape, all the node's completely free GPUs
  while at least one copy still fits there (CPU, memory, enough free GPUs), else none — the
  node either can still serve that shape or all its free GPUs are lost to it; none where the
  node's GPU model is not accepted. CPU or memory used up beside idle GPUs therefore counts as
  lost GPU room, as does a GPU left with a sliver no shape fits.
* A shape that accepts only some GPU models weighs more, by its **scarcity**: the room every
  node together has left for it were it to take any model, over the room left on the models
  it takes (each at least one GPU's worth). GPU models are a resource, not just a filter: the
  room of a model few GPUs have runs out long before the cluster's, and, valued by frequency
  alone, a pod that can run on any model would take the last free GPUs of a model that the
  pods pinned to it need (the tightest fit is often a small node of that model). A shape that
  takes any model has a scarcity of 1.
* A placement's **loss** is how much the node's room drops, each shape's room weighted by its
  frequency times its scarcity, counted in steps of :data:`LOSS_STEP` milli-GPU. The pod goes
  where the loss is least; ties go to the tightest fit (the least idle left on the GPU a shared
  pod takes, else the least idle GPU capacity left on the node), then to the lowest node
  index. That last rule is first fit: it fills nodes in a fixed order and keeps the last ones
  whole for the largest pods.

:class:`Packer` holds a profile and a cluster's state as arrays and recomputes a node's room only
when its row changed: one pod takes 0.23 ms (median) at 1,213 nodes, 1.1 ms at 12,130.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DISTINCT_AT",
    "LOSS_STEP",
    "MAX_SHAPES",
    "MILLI",
    "Choice",
    "Columns",
    "Nodes",
    "Packer",
    "Profile",
    "Shape",
    "access_of",
]

MILLI = 1000
"""One whole GPU, in milli-GPU."""
LOSS_STEP = 150.0
"""Losses within the same step (milli-GPU) count as equal, so the tightest fit and then first
fit decide between them (chosen on the trace: docs/simulation.md)."""

DISTINCT_AT = 256
""":meth:`Packer.choose` over more candidates than this scores one node of each distinct
state (free CPU, memory, each GPU's idle milli, model): nodes alike lose alike, and the lowest
index among them is the one the tie-break would take. A busy fleet has few distinct states
(full nodes, empty ones), so a choice among 12,000 nodes scores hundreds."""

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.floating[Any]]


@dataclass(frozen=True)
class Shape:
    """One pod's request."""

    cpu: int
    memory: int
    gpus: int = 0
    gpu_milli: int = 0
    """Of each of its GPUs, 1..1000 (1000: whole GPUs); 0 without GPUs."""
    models: frozenset[str] = frozenset()
    """The GPU models it accepts; empty: any."""

    @property
    def shared(self) -> bool:
        """One GPU, not all of it: it may share that GPU with other pods."""
        return self.gpus == 1 and self.gpu_milli < MILLI

    @property
    def total_milli(self) -> int:
        return self.gpus * self.gpu_milli


@dataclass
class Nodes:
    """A cluster's free capacity as arrays, in whatever units the profile uses."""

    cpu: Ints
    memory: Ints
    gpu_idle: Ints
    """(nodes, most GPUs on one node): idle milli of each GPU; −1 where there is none."""
    model: npt.NDArray[np.int32]
    """Each node's GPU model, as a code of :attr:`models`."""
    models: Mapping[str | None, int]


@dataclass(frozen=True)
class Choice:
    node: int
    gpus: tuple[int, ...]
    """The GPUs (indexes on the node) the pod takes; empty without GPUs."""


MAX_SHAPES = 256
"""Shapes a profile keeps (the openb pod lists have at most 126)."""


@dataclass(frozen=True)
class Profile:
    """The expected mix of GPU pod shapes, with weights that sum to 1."""

    shapes: tuple[Shape, ...]
    weights: tuple[float, ...]

    @classmethod
    def of(cls, pods: Iterable[Shape]) -> Profile:
        """The profile of ``pods`` (e.g. a workload file, or the gangs of a snapshot): the
        :data:`MAX_SHAPES` most frequent shapes (placement costs time in the number of
        shapes; the rarer ones are left out of the expectation, not refused)."""
        counts = Counter(p for p in pods if p.gpus)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _order(kv[0])))[:MAX_SHAPES]
        return cls.weighted({s: float(n) for s, n in ranked})

    @classmethod
    def weighted(cls, weights: Mapping[Shape, float]) -> Profile:
        shapes = tuple(s for s, w in weights.items() if s.gpus and w > 0)
        total = sum(weights[s] for s in shapes)
        return cls(shapes, tuple(weights[s] / total for s in shapes))


def _order(s: Shape) -> tuple[int, int, int, int, tuple[str, ...]]:
    return (s.cpu, s.memory, s.gpus, s.gpu_milli, tuple(sorted(s.models)))


F32 = np.float32
Counts = npt.NDArray[np.float32]
EXACT = 2**24
"""Below this, float32 holds every whole number and divides them with an exact floor."""


@dataclass
class Columns:
    """A profile as float32 columns (exact: every amount is below :data:`EXACT`)."""

    cpu: Counts
    memory: Counts
    share: Counts
    """A shared shape's milli per copy; +inf for a whole-GPU shape (no copies per GPU)."""
    whole: Counts
    """GPUs a whole-GPU shape needs; +inf for a shared one."""
    shared: npt.NDArray[np.bool_]
    per_copy: Counts
    """A shared shape's milli per copy; 0 for a whole-GPU shape."""
    weight: Counts
    per_full: Counts
    """Copies a completely free GPU takes (shared: ⌊1000 ÷ share⌋; whole: 0)."""

    @classmethod
    def of(cls, profile: Profile) -> Columns:
        s = profile.shapes
        shared = np.array([x.shared for x in s], dtype=bool)
        share = np.array([x.gpu_milli if x.shared else np.inf for x in s], dtype=F32)
        return cls(
            cpu=np.array([max(x.cpu, 1) for x in s], dtype=F32),
            memory=np.array([max(x.memory, 1) for x in s], dtype=F32),
            share=share,
            whole=np.array([np.inf if x.shared else x.gpus for x in s], dtype=F32),
            shared=shared,
            per_copy=np.where(shared, share, F32(0)),
            weight=np.array(profile.weights, dtype=F32),
            per_full=np.floor(F32(MILLI) / share),
        )


def access_of(profile: Profile, nodes: Nodes) -> Counts | None:
    """(nodes, shapes): 1 where a shape accepts the node's GPU model, else 0; None when every
    shape accepts any."""
    if not any(s.models for s in profile.shapes):
        return None
    access = np.ones((len(nodes.model), len(profile.shapes)), dtype=F32)
    for j, shape in enumerate(profile.shapes):
        if shape.models:
            ok = [nodes.models[m] for m in shape.models if m in nodes.models]
            access[:, j] = np.isin(nodes.model, ok)
    return access


@dataclass
class Packer:
    """The packing rule over one cluster's :class:`Nodes` (see the module docstring)."""

    profile: Profile
    nodes: Nodes
    access: Counts | None = None
    """(nodes, shapes): 1 where the node's model is accepted (:func:`access_of`, worked out
    when not given); None when every shape takes any."""
    arrays: Columns | None = None
    """The profile as columns (:meth:`Columns.of`, worked out when not given)."""
    scarcity: bool | None = None
    """Weigh pinned shapes by their scarcity (the module docstring), worked out over ``nodes``,
    which must then be the whole cluster. None: on, unless ``arrays`` is given —
    :mod:`gangway.scheduling.capacity` gives it to packers over the few nodes whose loss it has
    not yet kept, and keeps a node's loss per node state, which a cluster-wide scarcity would
    break; it gets the profile's weights as they are."""
    _p: Columns = field(init=False)
    _access: Counts | None = field(init=False)
    _rooms: Counts = field(init=False)
    """(nodes, shapes): each node's room for each shape (milli-GPU)."""
    _copies: Counts = field(init=False)
    """(nodes, shapes): copies of each shared shape the node's GPUs take (CPU aside)."""
    _seen: tuple[Ints, Ints, Ints] = field(init=False)
    _state: Ints = field(init=False)
    """(nodes,): each node's state id (:data:`DISTINCT_AT`); equal ids, equal rows."""
    _states: dict[bytes, int] = field(init=False)
    _anywhere: Counts | None = field(init=False)
    """(nodes, shapes): each node's room for each shape were it to take any model; None
    when :attr:`scarcity` is off or every shape takes any."""
    _left: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] = field(init=False)
    """(shapes,) twice: the room every node together has left for each shape, on the models
    it takes and on any (exact: whole numbers in float64); empty without :attr:`_anywhere`."""

    def __post_init__(self) -> None:
        n = self.nodes
        for what, values in (("CPU", n.cpu), ("memory", n.memory)):
            if len(values) and int(values.max()) >= EXACT:
                raise ValueError(f"{what} amounts must be below 2**24 (use coarser units)")
        self._p = self.arrays or Columns.of(self.profile)
        self._access = self.access if self.access is not None else access_of(self.profile, n)
        self._seen = (n.cpu.copy(), n.memory.copy(), n.gpu_idle.copy())
        self._states = {}
        self._state = self._state_ids(np.arange(len(n.cpu)))
        self._copies = self._copies_of(n.gpu_idle)
        if self.scarcity is None:
            self.scarcity = self.arrays is None
        full = (n.gpu_idle == MILLI).sum(1)
        if self.scarcity and self._access is not None:
            self._anywhere = self._rooms_of(n.cpu, n.memory, self._copies, full, None)
            self._rooms = self._anywhere * self._access
            self._left = (_sum(self._rooms), _sum(self._anywhere))
        else:
            self._anywhere, self._left = None, (np.zeros(0), np.zeros(0))
            self._rooms = self._rooms_of(n.cpu, n.memory, self._copies, full, self._access)

    def _state_ids(self, rows: Ints) -> Ints:
        """The state id of each of ``rows`` as they are now (new states get new ids)."""
        n = self.nodes
        key = np.concatenate(
            (n.cpu[rows, None], n.memory[rows, None], n.model[rows, None], n.gpu_idle[rows]),
            axis=1,
            dtype=np.int64,
        )
        ids = [self._states.setdefault(k.tobytes(), len(self._states)) for k in key]
        return np.array(ids, dtype=np.int64)

    def _copies_of(self, idle: Ints) -> Counts:
        free = np.maximum(idle, 0).astype(F32)
        copies: Counts = np.floor(free[:, :, None] / self._p.share).sum(axis=1, dtype=F32)
        return copies

    def _rooms_of(
        self, cpu: Ints, memory: Ints, copies: Counts, full: Ints, access: Counts | None
    ) -> Counts:
        """(rows, shapes): the room (milli-GPU) of each row for each shape — for a shared
        shape, the copies its CPU, memory and GPUs allow times its share; for a whole-GPU
        shape, every completely free GPU while one copy still fits, else none."""
        p = self._p
        free = full.astype(F32)[:, None]
        k = np.minimum(cpu.astype(F32)[:, None] / p.cpu, memory.astype(F32)[:, None] / p.memory)
        k = np.floor(np.minimum(k, np.where(p.shared, copies, free / p.whole)))
        rooms: Counts = np.where(p.shared, k * p.per_copy, (k >= 1) * free * F32(MILLI))
        return rooms if access is None else rooms * access

    def _refresh(self) -> None:
        """Recompute the room of the nodes whose free capacity changed since last seen."""
        n, (cpu, mem, idle) = self.nodes, self._seen
        rows = np.flatnonzero((n.cpu != cpu) | (n.memory != mem) | (n.gpu_idle != idle).any(axis=1))
        if not len(rows):
            return
        cpu[rows], mem[rows], idle[rows] = n.cpu[rows], n.memory[rows], n.gpu_idle[rows]
        self._state[rows] = self._state_ids(rows)
        self._copies[rows] = self._copies_of(n.gpu_idle[rows])
        full = (n.gpu_idle[rows] == MILLI).sum(1)
        if self._anywhere is None:
            access = None if self._access is None else self._access[rows]
            self._rooms[rows] = self._rooms_of(
                n.cpu[rows], n.memory[rows], self._copies[rows], full, access
            )
            return
        assert self._access is not None
        pinned, anywhere = self._left
        pinned -= _sum(self._rooms[rows])
        anywhere -= _sum(self._anywhere[rows])
        self._anywhere[rows] = self._rooms_of(
            n.cpu[rows], n.memory[rows], self._copies[rows], full, None
        )
        self._rooms[rows] = self._anywhere[rows] * self._access[rows]
        pinned += _sum(self._rooms[rows])
        anywhere += _sum(self._anywhere[rows])

    def weights(self) -> Counts:
        """What a milli-GPU of room for each shape is worth now: its weight in the profile,
        times its scarcity (1 for a shape that takes any model, and for every shape when
        :attr:`scarcity` is off)."""
        self._refresh()
        p = self._p
        if self._anywhere is None:
            return p.weight
        pinned, anywhere = self._left
        scarcity = np.maximum(anywhere, MILLI) / np.maximum(pinned, MILLI)
        value: Counts = (p.weight * scarcity).astype(F32)
        return value

    def room(self) -> Floats:
        """Each node's profile-weighted room now (milli-GPU)."""
        self._refresh()
        value: Floats = self._rooms @ self._p.weight
        return value

    def choose(self, pod: Shape, candidates: Ints) -> Choice:
        """Where ``pod`` goes among ``candidates`` (node indexes it fits on, ascending; at
        least one)."""
        if len(candidates) > DISTINCT_AT:  # one node of each state: the lowest-index one
            self._refresh()
            _, first = np.unique(self._state[candidates], return_index=True)
            candidates = candidates[np.sort(first)]
        rows, gpu, loss, tight = self.losses(pod, candidates)
        best = int(np.lexsort((rows, tight, np.floor(loss / LOSS_STEP)))[0])
        node = int(rows[best])
        if pod.shared:
            return Choice(node, (int(gpu[best]),))
        free = np.flatnonzero(self.nodes.gpu_idle[node] == MILLI)
        return Choice(node, tuple(int(g) for g in free[: pod.gpus]))

    def losses(self, pod: Shape, candidates: Ints) -> tuple[Ints, Ints, Floats, Ints]:
        """Every way to place ``pod`` on ``candidates``: (node, GPU for a shared pod else −1,
        loss, tightness), one row per distinct option."""
        weight = self.weights()
        n, c, p = self.nodes, np.asarray(candidates, dtype=np.int64), self._p
        cpu, mem = n.cpu[c] - pod.cpu, n.memory[c] - pod.memory
        idle = n.gpu_idle[c]
        full = (idle == MILLI).sum(1)
        if pod.shared:
            k, g = _distinct_fits(idle, pod.gpu_milli)
            before = idle[k, g].astype(F32)[:, None]
            copies = (
                self._copies[c[k]]
                - np.floor(before / p.share)
                + np.floor((before - F32(pod.gpu_milli)) / p.share)
            )
            access = None if self._access is None else self._access[c[k]]
            after = self._rooms_of(cpu[k], mem[k], copies, full[k] - (idle[k, g] == MILLI), access)
            loss = (self._rooms[c[k]] - after) @ weight
            return c[k], g, loss, idle[k, g] - pod.gpu_milli
        rest = np.floor(F32(MILLI - pod.gpu_milli) / p.share) if pod.gpus else F32(0)
        copies = (self._copies[c] - F32(pod.gpus) * (p.per_full - rest)).astype(F32)
        access = None if self._access is None else self._access[c]
        after = self._rooms_of(cpu, mem, copies, full - pod.gpus, access)
        left = np.maximum(idle, 0).sum(1) - pod.total_milli
        loss = (self._rooms[c] - after) @ weight
        return c, np.full(len(c), -1, dtype=np.int64), loss, left


def _sum(rooms: Counts) -> npt.NDArray[np.float64]:
    """(shapes,): rooms summed over the rows, exactly (whole numbers in float64)."""
    total: npt.NDArray[np.float64] = rooms.sum(axis=0, dtype=np.float64)
    return total


def _distinct_fits(idle: Ints, milli: int) -> tuple[Ints, Ints]:
    """(row, GPU) of every GPU with ``milli`` idle, one per distinct idle value in a row."""
    ok = idle >= milli
    for i in range(1, idle.shape[1]):
        ok[:, i] &= ~(idle[:, :i] == idle[:, i : i + 1]).any(axis=1)
    rows, gpus = np.nonzero(ok)
    return rows.astype(np.int64), gpus.astype(np.int64)
