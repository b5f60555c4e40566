"""The fleet twin: gangs replayed over time through the platform's own decisions.

Gangs arrive, wait in a pending queue, start, finish and free their nodes; a gang that starts by
preemption evicts its victims, which lose the work since their last checkpoint and are queued
again with what is left. Every attempt asks a *decision* (:data:`Decide`) over the fleet as it
is at that moment — by default :func:`platform_decision`, which is
:func:`gangway.scheduling.placement.place`, the same ``admit`` / preemption / ``place`` that
``gangway submit --cluster auto`` runs, over one
:class:`~gangway.scheduling.capacity.SnapshotView` that the replay keeps current with
:meth:`~gangway.scheduling.capacity.ClusterView.hold` and
:meth:`~gangway.scheduling.capacity.ClusterView.release` (never rebuilt). Volcano's queue
semantics come with it: guarantee, deserved and capability of each queue, preempt within a
queue by priority, reclaim across queues down to the guarantee (:mod:`~gangway.scheduling.
preemption`).

**The pending queue** is tried after each event in Volcano's order (:data:`ORDERS`):
``volcano`` — priority class value (highest first), then the queue's share (its GPUs held ÷ its
deserved GPUs over the fleet, lowest first: the capacity plugin's queue order), then arrival
(FIFO); ``fifo`` — arrival only. Each gang that the decision admits starts; one that must wait
stays (backfill: the gangs behind it are still tried), and the others of the same shape, queue
and class are not asked again in that pass (nothing has been freed since). After an event that
frees nothing (only arrivals) only the new gangs are tried. A gang the decision rejects (it can
never fit: no domain large enough, beyond its queue's capability) leaves the queue as *never
fits*.

**Refusals remembered** (:attr:`TwinSettings.memo`, with :func:`platform_decision`): where a
gang could evict nobody in a cluster, that cluster's verdict reads only its own state — the free
nodes of the gang's model and what its queue (and those above it) run — and the gang's shape,
not the time nor the gang's name. A *wait* or *reject* there is kept per shape with the
versions of what it read (each start and stop bumps them); a gang whose shape every cluster
still refuses (at least one waiting) is answered *wait* without asking, and a cluster changed
since is asked on its own (:func:`~gangway.scheduling.admission.admit` for that cluster) — the
full decision only when one would admit. The same decisions as asking every time (checked on a
loaded replay), counted as decisions.

**Time lost to preemption**: a victim that started at s and checkpoints every c seconds keeps
⌊(now − s) / c⌋ · c seconds of its work and loses the rest (all of it with no checkpoints);
it goes back to the pending queue with its original arrival. (The decision ranks victims by the
GPU-hours since they started — what :func:`~gangway.scheduling.preemption.lost_gpu_hours` reads
when lineage has no checkpoint for them; the replay charges the true loss.)

**Invariants**, checked at every event (:class:`InvariantViolation` when one fails): no node's
CPU, memory or GPUs over-committed (a start only on nodes with room for its pods, and nothing
free below zero or above allocatable afterwards); no split gang (a start places all its pods,
inside one domain of the tier it must stay within); no reclaim below a queue's guarantee (a
queue that loses gangs to another queue keeps at least its guarantee); only running gangs
evicted, and none when preemption is off.

The replay is deterministic: the same fleet, gangs and settings give the same run.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from gangway.scheduling.admission import ClusterDecision, Verdict, WaitsFor, admit, in_cluster
from gangway.scheduling.capacity import ClusterView, SnapshotView, fill, fit, view_of
from gangway.scheduling.placement import Placement, place
from gangway.scheduling.preemption import may_reclaim
from gangway.scheduling.simulation.fleet import CPU_PER_GPU, MEMORY_PER_GPU_GI
from gangway.scheduling.simulation.twin_fleet import TwinFleet
from gangway.scheduling.simulation.twin_workload import TwinGang
from gangway.scheduling.snapshot.build import T0
from gangway.scheduling.snapshot.cluster_state import Amount, Gang, QueueState, Snapshot
from gangway.scheduling.workload import Workload
from gangway.units import VOLCANO_KEYS

__all__ = [
    "ORDERS",
    "Choice",
    "Decide",
    "GangOutcome",
    "InvariantViolation",
    "Start",
    "TwinRun",
    "TwinSettings",
    "first_fit_decision",
    "platform_decision",
    "replay_twin",
]

ORDERS = ("volcano", "fifo")


class InvariantViolation(RuntimeError):
    """A decision broke one of the scheduler's invariants (see the module docstring): a bug in
    the decision, never in the workload."""


@dataclass(frozen=True)
class Start:
    """Where a gang starts: a cluster, node row → pods, and the running gangs evicted first."""

    cluster: str
    nodes: Mapping[int, int]
    victims: tuple[Gang, ...] = ()


@dataclass(frozen=True)
class Choice:
    verdict: Verdict
    start: Start | None = None
    reason: str = ""


Decide = Callable[[Workload, SnapshotView], Choice]
"""A decision: for one gang over the fleet as it is, start it (where, evicting whom), or not."""


def platform_decision(w: Workload, fleet: SnapshotView) -> Choice:
    """The platform's own: :func:`~gangway.scheduling.placement.place` (admission, preemption,
    the cluster and domain), taking its chosen option."""
    return _platform(w, fleet)[0]


def _platform(w: Workload, fleet: SnapshotView) -> tuple[Choice, Placement]:
    """:func:`platform_decision`, with the placement it read (every cluster's verdict)."""
    p = place(w, fleet)
    best = p.chosen
    if best is None:
        return Choice(Verdict.REJECT, reason=p.decision.reason), p
    d = best.decision
    if d.verdict == Verdict.ADMIT and d.assignment is not None:
        return Choice(d.verdict, Start(best.cluster, d.assignment.nodes)), p
    plan = d.preemption if d.verdict == Verdict.PREEMPT else None
    if plan is not None:
        victims = tuple(v.gang for v in plan.victims)
        return Choice(d.verdict, Start(best.cluster, plan.assignment.nodes, victims)), p
    return Choice(Verdict.WAIT, reason=d.reason), p


WAITS = Choice(Verdict.WAIT, reason="refused before, nothing changed since")


def first_fit_decision(w: Workload, fleet: SnapshotView) -> Choice:
    """The baseline: admission's quota and fit checks, then the first cluster that admits it,
    the first domain (in node order) at its tier with room, its nodes in order — no packing,
    no ranking of clusters."""
    d = admit(w, fleet)
    if d.verdict == Verdict.REJECT:
        return Choice(Verdict.REJECT, reason=d.reason)
    for c in d.clusters:
        if c.verdict != Verdict.ADMIT:
            continue
        view = fleet.clusters[c.cluster]
        resolved = in_cluster(d.workload, view)
        counts = fit(view, resolved.per_pod, resolved.gpu_type)
        if resolved.within is None:
            rows = np.flatnonzero(counts > 0)
        else:
            ids = view.domains[view.state.tiers.index(resolved.within)]
            cap = np.bincount(ids, weights=counts)
            first = int(np.flatnonzero(cap >= resolved.pods)[0])
            rows = np.flatnonzero((ids == first) & (counts > 0))
        return Choice(Verdict.ADMIT, Start(c.cluster, fill(counts, rows, resolved.pods)))
    return Choice(Verdict.WAIT, reason=d.reason)


@dataclass(frozen=True)
class TwinSettings:
    """How one replay runs: its name in the report, how long, the queue order, the decision,
    whether preemption is on, and the checkpoint interval of gangs that name none."""

    name: str = "twin"
    horizon_s: int = 30 * 86400
    order: str = "volcano"
    decide: Decide = platform_decision
    preemption: bool = True
    checkpoint_s: int = 3600
    memo: bool = True
    """With :func:`platform_decision`: a gang whose shape each cluster refused (wait, or
    reject) unchanged since, where it could evict nobody, is answered *wait* without asking
    again (see :meth:`_Replay.remembered`) — the same decisions; off only to check that."""


@dataclass
class GangOutcome:
    gang: TwinGang
    queue: str | None = None
    first_start_s: float | None = None
    end_s: float | None = None
    cluster: str | None = None
    preemptions: int = 0
    lost_gpu_hours: float = 0.0
    never_fits: str | None = None
    """Why it can never start (the decision's reason), when it cannot."""

    @property
    def wait_s(self) -> float | None:
        """Arrival → first start."""
        return None if self.first_start_s is None else self.first_start_s - self.gang.arrival_s


@dataclass
class TwinRun:
    settings: TwinSettings
    capacity: int
    """GPUs of the fleet."""
    queues: tuple[str, ...]
    outcomes: list[GangOutcome]
    times: list[float] = field(default_factory=list)
    held: list[tuple[int, ...]] = field(default_factory=list)
    """GPUs each of ``queues`` holds from each of ``times`` until the next."""
    decisions: int = 0
    decision_s: float = 0.0
    seconds: float = 0.0
    """Wall-clock of the whole replay."""
    events: int = 0

    @property
    def name(self) -> str:
        return self.settings.name


@dataclass
class _Running:
    gang: Gang
    cluster: str
    since: float
    remaining: float
    run: int
    models: frozenset[int] = frozenset()
    """The GPU model codes of the nodes it holds."""


@dataclass
class _Gang:
    """A gang as the replay carries it: its workload, its resolved queue and class, what is
    left of its work."""

    spec: TwinGang
    workload: Workload
    queue: str
    priority_class: str | None
    priority: int
    remaining: float
    key: tuple[object, ...]


def _without_preemption(snap: Snapshot) -> Snapshot:
    classes = {
        n: c.model_copy(update={"preempting": False}) for n, c in snap.priority_classes.items()
    }
    return snap.model_copy(update={"priority_classes": classes})


def _per_gpu(snap: Snapshot) -> tuple[int, int]:
    """CPU cores and GiB of memory a pod asks per GPU: an 8 × H100 server's proportions
    (:data:`~gangway.scheduling.simulation.fleet.CPU_PER_GPU`), or less where the fleet's
    leanest GPU node has less."""
    cpu, mem = CPU_PER_GPU, MEMORY_PER_GPU_GI
    for c in snap.clusters.values():
        for n in c.nodes:
            if n.gpu_type and n.allocatable.gpus:
                cpu = min(cpu, n.allocatable.cpu // 1000 // n.allocatable.gpus)
                mem = min(mem, n.allocatable.memory // 2**30 // n.allocatable.gpus)
    return cpu, mem


_Refusal = tuple[tuple[int, ...], ClusterDecision]
"""A cluster's refusal of a shape: the versions it read and its decision."""


class _Replay:
    def __init__(self, fleet: TwinFleet, gangs: Sequence[TwinGang], s: TwinSettings) -> None:
        if s.order not in ORDERS:
            raise ValueError(f"order {s.order!r}: one of {', '.join(ORDERS)}")
        snap = fleet.snapshot.model_copy(deep=True)
        self.snap = snap if s.preemption else _without_preemption(snap)
        self.fleet = view_of(self.snap)
        self.s = s
        self.cpu, self.mem = _per_gpu(self.snap)
        self.amounts: dict[int, Amount] = {}
        self.gangs = [self._prepare(g) for g in gangs]
        self.index = {g.spec.name: i for i, g in enumerate(self.gangs)}
        self.outcomes = [GangOutcome(g.spec, queue=g.queue) for g in self.gangs]
        queues = sorted({q for c in self.snap.clusters.values() for q in c.queues})
        self.queues = tuple(queues)
        self.held = dict.fromkeys(queues, 0)
        self.running: dict[int, _Running] = {}
        self.pending: dict[int, None] = {}
        self.events: list[tuple[float, int, int, int]] = []
        self.runs = 0
        self.dirty = False
        self.decisions, self.decision_s = 0, 0.0
        self.tried: set[int] = set()
        self.evicts: dict[tuple[str, tuple[object, ...]], bool] = {}
        """(cluster, gang key) → :meth:`_may_evict`, in this pass until a gang starts."""
        self.memo = s.memo and s.decide is platform_decision
        self.version: dict[tuple[str, object], int] = {}
        """(cluster, None) → its starts and stops; (cluster, model code) → those on its nodes
        of the model; (cluster, queue name) → those of gangs of the queue or below it."""
        self.refused: dict[tuple[str, tuple[object, ...]], _Refusal] = {}
        """(cluster, gang key) → the versions its verdict reads (:meth:`_stamp`) and the
        cluster's decision (wait or reject), where the gang could evict nobody there
        (:meth:`remembered`)."""

    def _prepare(self, g: TwinGang) -> _Gang:
        per = self.amounts.get(g.gpus_per_pod)
        if per is None:
            per = self.amounts[g.gpus_per_pod] = Amount.model_validate(
                {
                    "cpu": self.cpu * g.gpus_per_pod,
                    "memory": self.mem * 2**30 * g.gpus_per_pod,
                    "gpus": g.gpus_per_pod,
                }
            )
        team = self.snap.teams.get(g.team)
        queue = g.queue or (team.queue if team else "")
        cls = g.priority_class or (team.priority_classes[0] if team else None)
        info = self.snap.priority_classes.get(cls or "")
        w = Workload(
            g.name,
            g.pods,
            per,
            team=g.team,
            queue=g.queue,
            priority_class=g.priority_class,
            gpu_type=g.gpu_model,
            within=g.within,
        )
        key = (queue, cls, g.pods, g.gpus_per_pod, g.gpu_model, g.within, g.team)
        value = info.value if info else 0
        return _Gang(g, w, queue, cls, value, float(g.duration_s), key)

    def checkpoint_s(self, g: _Gang) -> int:
        return self.s.checkpoint_s if g.spec.checkpoint_s is None else g.spec.checkpoint_s

    # --- the queue -------------------------------------------------------------------------

    def _shares(self) -> dict[str, float]:
        """Queue → GPUs held ÷ deserved GPUs over the fleet (the capacity plugin's order)."""
        out = {}
        for q in self.queues:
            deserved = sum(
                v.deserved(q).get("gpu", 0)
                for v in self.fleet.clusters.values()
                if q in v.state.queues
            )
            out[q] = self.held[q] / deserved if deserved else float("inf")
        return out

    def ordered(self, candidates: Sequence[int]) -> list[int]:
        g = self.gangs
        if self.s.order == "fifo":
            return sorted(candidates, key=lambda i: (g[i].spec.arrival_s, i))
        share = self._shares()
        return sorted(
            candidates,
            key=lambda i: (-g[i].priority, share.get(g[i].queue, 0.0), g[i].spec.arrival_s, i),
        )

    def attempt(self, candidates: Sequence[int], now: float) -> None:
        """One pass over ``candidates`` in the queue's order (see the module docstring)."""
        fleet = SnapshotView(
            self.snap.model_copy(update={"taken_at": T0 + timedelta(seconds=now)}),
            self.fleet.clusters,
        )
        waiting: set[tuple[object, ...]] = set()
        hopes: dict[tuple[str, str | None], int] = {}
        self.evicts.clear()
        for i in self.ordered(candidates):
            g = self.gangs[i]
            if g.key in waiting or (i in self.tried and self._hopeless(g, fleet, hopes)):
                continue
            self.tried.add(i)
            started = time.perf_counter()
            choice = self.decide(g, fleet)
            self.decision_s += time.perf_counter() - started
            self.decisions += 1
            if choice.verdict == Verdict.REJECT:
                self.outcomes[i].never_fits = choice.reason or "rejected"
                self.pending.pop(i, None)
            elif choice.start is None:
                waiting.add(g.key)
            else:
                self.start(i, choice.start, now)
                hopes.clear()
                self.evicts.clear()
                if choice.start.victims:
                    waiting.clear()

    def decide(self, g: _Gang, fleet: SnapshotView) -> Choice:
        """The decision for ``g`` — remembered where it can be (:meth:`remembered`)."""
        if not self.memo:
            return self.s.decide(g.workload, fleet)
        if self.remembered(g, fleet):
            return WAITS
        choice, p = _platform(g.workload, fleet)
        if choice.verdict != Verdict.WAIT:
            return choice
        for o in p.options:
            view = fleet.clusters[o.cluster]
            if not self._evicts(g, o.cluster, view):
                self.refused[(o.cluster, g.key)] = (self._stamp(g, view), o.decision)
        return choice

    def _evicts(self, g: _Gang, name: str, view: ClusterView) -> bool:
        """:meth:`_may_evict`, kept in :attr:`evicts` (this pass, until a gang starts)."""
        evicts = self.evicts.get((name, g.key))
        if evicts is None:
            evicts = self.evicts[(name, g.key)] = self._may_evict(g, view)
        return evicts

    def _stamp(self, g: _Gang, view: ClusterView) -> tuple[int, ...]:
        """The versions of what ``g``'s verdict in ``view`` reads where it can evict nobody:
        the free room of the nodes of its model (all nodes, naming none) and the usage of
        its queue and the queues above it (capability)."""
        v, name = self.version, view.name
        model: object = None if g.spec.gpu_model is None else view.types.get(g.spec.gpu_model, -1)
        free = v.get((name, model), 0)
        return (free, *(v.get((name, q), 0) for q in view.ancestors(g.queue)))

    def _changed(self, view: ClusterView, queue: str, models: frozenset[int]) -> None:
        v, name = self.version, view.name
        for key in (None, *models, *view.ancestors(queue)):
            v[(name, key)] = v.get((name, key), 0) + 1

    def remembered(self, g: _Gang, fleet: SnapshotView) -> bool:
        """Whether every cluster refused ``g``'s shape (everything its verdict there reads:
        queue, class, pods, per-pod amount, model, tier, team) since it last changed, with at
        least one *wait*, where it could evict nobody — a verdict that reads only the
        cluster's state, not the time (victims are ranked by what they would lose now) nor
        the gang's name. A cluster changed since is asked again on its own
        (:func:`~gangway.scheduling.admission.admit` for that cluster); the answer is *wait*
        when none admits, else the full decision is asked."""
        waits, fresh = False, []
        for name, view in fleet.clusters.items():
            if self._evicts(g, name, view):
                return False
            seen = self.refused.get((name, g.key))
            stamp = self._stamp(g, view)
            if seen is not None and _still(seen, stamp):
                waits = waits or seen[1].verdict == Verdict.WAIT
            else:
                fresh.append((name, stamp))
        for name, stamp in fresh:
            d = admit(g.workload, fleet, cluster=name)
            if d.problems or d.verdict < Verdict.WAIT:
                return False
            self.refused[(name, g.key)] = (stamp, d.clusters[0])
            waits = waits or d.verdict == Verdict.WAIT
        return waits

    def _hopeless(
        self, g: _Gang, fleet: SnapshotView, hopes: dict[tuple[str, str | None], int]
    ) -> bool:
        """Whether ``g`` (asked before, so not one that can never fit) can neither fit in the
        free GPUs of its model in any cluster nor evict anyone there: the decision would say
        wait, and is not asked. ``hopes`` caches, for this pass, (cluster, model) → the
        GPUs of that model free there."""
        if g.spec.gpu_model is None:
            return False
        for name, view in fleet.clusters.items():
            room = hopes.get((name, g.spec.gpu_model))
            if room is None:
                code = view.types.get(g.spec.gpu_model, -1)
                room = int(view.free[view.gpu_type == code, 2].sum())
                hopes[(name, g.spec.gpu_model)] = room
            if room >= g.spec.gpus:
                return False
            evicts = self.evicts.get((name, g.key))
            if evicts is None:  # the same for every gang of the key until the next start
                evicts = self.evicts[(name, g.key)] = self._may_evict(g, view)
            if evicts:
                return False
        return True

    def _may_evict(self, g: _Gang, view: ClusterView) -> bool:
        """Whether Volcano's rules could let ``g`` evict anyone in ``view`` (a superset of
        what :func:`~gangway.scheduling.preemption.plan_preemption` considers)."""
        info = self.snap.priority_classes.get(g.priority_class or "")
        if (info is not None and not info.preempting) or g.queue not in view.state.queues:
            return False
        own = view.running.get(g.queue, {})
        if g.spec.within is None and any(p < g.priority and gs for p, gs in own.items()):
            return True
        if not may_reclaim(g.workload, g.queue, view):
            return False
        for q, by_priority in view.running.items():
            state = view.state.queues.get(q)
            if q == g.queue or state is None or not state.reclaimable:
                continue
            if not any(by_priority.values()):
                continue
            share = view.deserved(q)
            if "gpu" not in share or any(view.used(q, k) > v for k, v in share.items()):
                return True
        return False

    # --- starting and stopping -------------------------------------------------------------

    def start(self, i: int, where: Start, now: float) -> None:
        g = self.gangs[i]
        view = self.fleet.clusters.get(where.cluster)
        if view is None:
            raise InvariantViolation(f"{g.spec.name}: started in unknown cluster {where.cluster}")
        if where.victims and not self.s.preemption:
            raise InvariantViolation(f"{g.spec.name}: evicts gangs with preemption off")
        before = {q: dict(view.usage.get(q, {})) for q in {v.queue for v in where.victims}}
        for v in where.victims:
            j = self.index.get(v.name)
            if j is None or j not in self.running or self.running[j].cluster != where.cluster:
                raise InvariantViolation(
                    f"{g.spec.name}: evicts {v.key}, which is not running there"
                )
            self.stop(j, now, evicted=True)
        _check_guarantees(view.state.queues, view.usage, before, g.queue, g.spec.name)
        _check_placement(view, g, where.nodes)
        gang = Gang(
            name=g.spec.name,
            queue=g.queue,
            priority_class=g.priority_class,
            priority=g.priority,
            pods=g.spec.pods,
            per_pod=g.workload.per_pod,
            gpu_type=g.spec.gpu_model or _model_of(view, where.nodes),
            started_at=T0 + timedelta(seconds=now),
        )
        held = view.hold(gang, dict(where.nodes))
        models = frozenset(int(view.gpu_type[r]) for r in where.nodes)
        self._changed(view, g.queue, models)
        self.runs += 1
        self.running[i] = _Running(held, where.cluster, now, g.remaining, self.runs, models)
        self.held[g.queue] = self.held.get(g.queue, 0) + g.spec.gpus
        self.pending.pop(i, None)
        out = self.outcomes[i]
        if out.first_start_s is None:
            out.first_start_s, out.cluster = now, where.cluster
        heapq.heappush(self.events, (now + g.remaining, 0, self.runs, i))

    def stop(self, i: int, now: float, *, evicted: bool) -> None:
        r = self.running.pop(i)
        g = self.gangs[i]
        self.fleet.clusters[r.cluster].release(r.gang)
        self._changed(self.fleet.clusters[r.cluster], g.queue, r.models)
        self.held[g.queue] -= g.spec.gpus
        if not evicted:
            self.outcomes[i].end_s = now
            return
        elapsed = now - r.since
        every = self.checkpoint_s(g)
        saved = (elapsed // every) * every if every > 0 else 0.0
        g.remaining = r.remaining - saved
        out = self.outcomes[i]
        out.preemptions += 1
        out.lost_gpu_hours += g.spec.gpus * (elapsed - saved) / 3600
        self.pending[i] = None
        self.dirty = True


def _still(seen: _Refusal, stamp: tuple[int, ...]) -> bool:
    """Whether a cluster's refusal (wait or reject, with no eviction possible) recorded at
    versions ``seen[0]`` still holds at ``stamp``: a rejection always (it reads only what
    does not change: the queue, the models, the tiers, what is allocatable, capability); a
    wait for quota while its queue and those above it run the same; a wait for room while
    that and the nodes of its model are unchanged too."""
    was, d = seen
    if d.verdict == Verdict.REJECT:
        return True
    if d.waits_for == WaitsFor.QUOTA:
        return was[1:] == stamp[1:]
    return was == stamp


def _model_of(view: ClusterView, nodes: Mapping[int, int]) -> str | None:
    codes = {int(view.gpu_type[r]) for r in nodes}
    names = {c: t for t, c in view.types.items()}
    return names.get(codes.pop()) if len(codes) == 1 else None


def _check_guarantees(
    queues: Mapping[str, QueueState],
    usage: Mapping[str, Mapping[str, int]],
    before: Mapping[str, Mapping[str, int]],
    preemptor: str,
    name: str,
) -> None:
    """No queue that lost gangs to another queue ends below its guarantee (having been at or
    above it)."""
    for q, was in before.items():
        if q == preemptor:
            continue
        for key, floor in queues[q].guarantee.items():
            if key not in VOLCANO_KEYS:
                continue
            now = usage.get(q, {}).get(key, 0)
            if now < floor and now < was.get(key, 0):
                raise InvariantViolation(
                    f"{name}: reclaims queue {q} below its guarantee of {key} ({now} < {floor})"
                )


def _check_placement(view: ClusterView, g: _Gang, nodes: Mapping[int, int]) -> None:
    """All the gang's pods placed, each node with room for its pods, in one domain of the tier
    it must stay within."""
    name, pods = g.spec.name, g.spec.pods
    if sum(nodes.values()) != pods or any(k < 1 for k in nodes.values()):
        raise InvariantViolation(f"{name}: split gang, {sum(nodes.values())} of {pods} pods placed")
    rows = np.fromiter(nodes.keys(), dtype=np.int64, count=len(nodes))
    if len(rows) and (rows.min() < 0 or rows.max() >= len(view.nodes)):
        raise InvariantViolation(f"{name}: placed on a node that does not exist")
    counts = fit(view, g.workload.per_pod, g.spec.gpu_model)
    want = np.fromiter(nodes.values(), dtype=np.int64, count=len(nodes))
    over = rows[counts[rows] < want]
    if len(over):
        raise InvariantViolation(
            f"{name}: over-commits node {view.nodes[int(over[0])]} "
            f"({int(want[rows == over[0]][0])} pods, room for {int(counts[over[0]])})"
        )
    if g.spec.within and g.spec.within in view.state.tiers:
        ids = view.domains[view.state.tiers.index(g.spec.within)][rows]
        if len(np.unique(ids)) > 1:
            raise InvariantViolation(f"{name}: spread over several {g.spec.within}s")


def _check_nodes(fleet: SnapshotView, now: float) -> None:
    for name, view in fleet.clusters.items():
        if (view.free < 0).any() or (view.free > view.allocatable).any():
            row = int(np.flatnonzero(((view.free < 0) | (view.free > view.allocatable)).any(1))[0])
            raise InvariantViolation(
                f"t={now:.0f}s: node {view.nodes[row]} of {name} is over-committed "
                f"(free {view.free[row].tolist()}, allocatable {view.allocatable[row].tolist()})"
            )


def replay_twin(
    fleet: TwinFleet,
    gangs: Sequence[TwinGang],
    settings: TwinSettings = TwinSettings(),
    *,
    progress: Callable[[int], None] | None = None,
) -> TwinRun:
    """Replay ``gangs`` on ``fleet`` until ``settings.horizon_s`` (see the module docstring);
    gangs arriving later are left out. Raises :class:`InvariantViolation` when a decision breaks
    an invariant."""
    started = time.perf_counter()
    gangs = [g for g in gangs if g.arrival_s <= settings.horizon_s]
    r = _Replay(fleet, gangs, settings)
    r.events = [(float(g.arrival_s), 1, 0, i) for i, g in enumerate(gangs)]
    heapq.heapify(r.events)
    capacity = sum(int(v.allocatable[:, 2].sum()) for v in r.fleet.clusters.values())
    run = TwinRun(settings, capacity, r.queues, r.outcomes)
    while r.events and r.events[0][0] <= settings.horizon_s:
        now = r.events[0][0]
        released, new = False, []
        while r.events and r.events[0][0] == now:
            _, kind, run_id, i = heapq.heappop(r.events)
            if kind == 1:
                r.pending[i] = None
                new.append(i)
            elif i in r.running and r.running[i].run == run_id:
                r.stop(i, now, evicted=False)
                released = True
        retry_all = released or r.dirty
        r.dirty = False
        r.attempt(list(r.pending) if retry_all else new, now)
        _check_nodes(r.fleet, now)
        run.times.append(now)
        run.held.append(tuple(r.held[q] for q in r.queues))
        run.events += 1
        if progress is not None and new:
            progress(len(new))
    run.decisions, run.decision_s = r.decisions, r.decision_s
    run.seconds = time.perf_counter() - started
    return run
