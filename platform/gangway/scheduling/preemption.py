"""Which running gangs would make room for a gang that does not fit — and what evicting them
would cost — following Volcano v1.15.1's rules:

* **preempt** (the ``preempt`` action, ``priority`` plugin): within the gang's own queue,
  only gangs of a lower PriorityClass value. The action skips every Job that carries a
  ``networkTopology``, hard or soft (``preempt.go``: ``job.ContainsNetworkTopology()``,
  volcano#4374): such a gang gets no same-queue victims.
* **reclaim** (the ``reclaim`` action, ``capacity`` plugin), from other queues:

  - the gang's queue may reclaim when, on at least one resource the gang requests (cpu,
    memory, ``nvidia.com/gpu``), its use with the gang stays within its deserved share — the
    plugin's ``PreemptiveFn`` (``futureUsed.LessEqualPartlyWithDimensionZeroFiltered(deserved,
    request)``); being over on the others does not stop it. A deserved share is at least the
    guarantee, and 0 where unset: a queue with neither never reclaims;
  - a victim's queue must be reclaimable; the victim is taken when its queue sets no deserved
    share of anything the victim uses (``isImmediateVictim``), or uses more than its deserved
    share of one of them (``GreaterPartlyWithRelevantDimensions``), its use re-counted after
    every victim (the plugin's ``allocations``), and never below its own guarantee
    (``checkGuaranteeConstraint``);
  - the action has no topology check: a Job with a ``networkTopology`` reclaims.
* **whole gangs** (``gang`` plugin): Volcano evicts pod by pod — the rendered scheduler config
  turns the gang plugin's preemptable check off — and the Job's ``PodEvicted → RestartJob``
  policy then restarts every pod of a victim, so a victim costs its whole gang: the plan counts
  each victim whole.
* a class with ``preemptionPolicy: Never`` (``preemptible: false`` in the platform config)
  waits instead of evicting anyone.

Victims are taken lowest priority first, then cheapest (GPU-hours lost since their last
checkpoint, from lineage when known; an unknown loss after every known one), then by name —
but first those that give back what the gang is short of (its GPU model, or CPU): a victim
that frees nothing the gang needs would only lower its queue's use, and could stop a useful
one from being reclaimed (so no verdict depends on the gangs' names); when no plan is found
because an earlier victim used up a queue's excess, it is tried again node by node, as
Volcano evicts (victims that make room for a pod on their nodes first). The set is then
pruned to what is needed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from gangway.scheduling.capacity import (
    Assignment,
    ClusterView,
    Ints,
    add_request,
    assign,
    fit,
    pod_shape,
)
from gangway.scheduling.snapshot.cluster_state import Gang
from gangway.scheduling.workload import Workload
from gangway.units import VOLCANO_KEYS, amount_said, quota_key, quota_keys

__all__ = [
    "Preemption",
    "Victim",
    "lost_gpu_hours",
    "over_capability",
    "plan_preemption",
    "reclaim_refusal",
    "unacted_preemption",
]

NO_PREEMPT_WITH_TOPOLOGY = (
    "Volcano's preempt action skips a Job that carries a networkTopology (hard or soft; "
    "volcano#4374), so it will not evict these gangs of its own queue although that would make "
    "room; it waits — reclaim from other queues, which has no topology check, could not make "
    "room either"
)


@dataclass(frozen=True)
class Victim:
    gang: Gang
    rule: str
    """Why it may be evicted, e.g. ``preempt: same queue, priority 1000 < 10000``."""
    lost_gpu_hours: float | None


@dataclass(frozen=True)
class Preemption:
    victims: tuple[Victim, ...]
    assignment: Assignment
    volcano_acts: bool
    note: str | None = None

    @property
    def cost(self) -> float | None:
        """GPU-hours lost in all, None when any victim's is unknown."""
        costs = [v.lost_gpu_hours for v in self.victims]
        return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)


def lost_gpu_hours(gang: Gang, now: datetime) -> float | None:
    """What evicting ``gang`` throws away: its GPUs × the time since its last checkpoint (or
    its start); None when neither is known."""
    since = gang.last_checkpoint_at or gang.started_at
    if since is None:
        return None
    hours = max((now - since).total_seconds(), 0.0) / 3600
    return round(gang.per_pod.gpus * gang.pods * hours, 2)


def _asks(total: Callable[[str], int]) -> list[str]:
    """The resources (of :data:`VOLCANO_KEYS`) an amount requests."""
    return [k for k in VOLCANO_KEYS if total(k) > 0]


def _relevant(g: Gang, share: dict[str, int]) -> list[str]:
    """The resources ``g`` uses that its queue's deserved ``share`` sets — those the
    capacity plugin judges a victim by (none: an immediate victim)."""
    return [k for k in _asks(g.total) if k in share]


def reclaim_refusal(w: Workload, queue: str, view: ClusterView) -> str | None:
    """Why Volcano's capacity plugin would not let ``queue`` reclaim for ``w`` (its
    ``PreemptiveFn``), or None when it may: see the module docstring."""
    if queue not in view.state.queues:
        return f"no queue {queue} in {view.name}"
    share = view.deserved(queue)
    asks = _asks(w.total)
    if not any(k in share for k in asks):
        return (
            f"queue {queue} sets no deserved share (nor guarantee) of {', '.join(asks)}, so "
            "Volcano never reclaims from other queues for it — give it one to reclaim"
        )
    over = []
    for k in asks:
        future = view.used(queue, k) + w.total(k)
        if future <= share.get(k, 0):
            return None
        over.append(f"{amount_said(k, future)} > {amount_said(k, share.get(k, 0))}")
    return (
        f"queue {queue} may not reclaim from other queues: with this gang it would be over its "
        f"deserved share of every resource the gang requests ({'; '.join(over)}), and Volcano "
        "reclaims only for a queue within its share of at least one"
    )


def _sources(
    w: Workload, queue: str, view: ClusterView, *, preempt: bool = True
) -> dict[str, dict[str, int]]:
    """The queues victims may come from, each with its deserved share
    (:func:`deserved_share`): ``queue`` itself (preempt, unless ``preempt`` is False), and —
    when ``queue`` may reclaim (:func:`reclaim_refusal`) — every other reclaimable queue that
    runs gangs (which of their gangs may go is :func:`_rule`'s)."""
    out: dict[str, dict[str, int]] = {queue: {}} if preempt else {}
    if reclaim_refusal(w, queue, view) is not None:
        return out
    for name in view.running:
        q = view.state.queues.get(name)
        if name != queue and q is not None and q.reclaimable:
            out[name] = view.deserved(name)
    return out


ROOM_FIRST_SCAN = 128
"""How many candidates of one priority level the node-by-node order reads ahead (beyond, it
takes them as they come): it bounds the retry's cost on a busy fleet."""


def _candidates(
    w: Workload,
    queue: str,
    priority: int,
    view: ClusterView,
    now: datetime,
    sources: dict[str, dict[str, int]],
    free: Ints | None = None,
) -> Iterator[tuple[Gang, str]]:
    """The running gangs that may be evicted for ``w`` (from ``sources``, :func:`_sources`)
    with their rules: first those giving back what ``w`` is short of, then the rest; each
    pass lowest priority first, then cheapest to lose, then by name — produced lazily, one
    priority level at a time. With ``free`` (the nodes as the plan has them, read as it
    evicts), each level gives first the gangs whose eviction alone makes room for another pod
    of ``w`` on their nodes, as Volcano evicts node by node only where that makes the pod fit."""
    levels = sorted(
        {p for q in sources for p in view.running.get(q, {}) if q != queue or p < priority}
    )
    rules: dict[tuple[str, str | None, bool, bool, bool, int], str | None] = {}

    def cost(g: Gang) -> float | None:
        return lost_gpu_hours(g, now)

    def allowed(g: Gang) -> str | None:
        p = g.per_pod
        key = (g.queue, g.gpu_type, bool(p.gpus), bool(p.cpu), bool(p.memory), g.priority)
        if key not in rules:
            rules[key] = _rule(g, queue, priority, sources[g.queue], view)
        return rules[key] if g.placement else None

    def makes_room(g: Gang) -> bool:
        assert free is not None
        rows, amounts = view.rows(g)
        kept = free[rows]
        before = fit(view, w.per_pod, w.gpu_type, free=free, rows=rows)
        free[rows] = np.minimum(kept + amounts, view.allocatable[rows])  # as if evicted
        after = fit(view, w.per_pod, w.gpu_type, free=free, rows=rows)
        free[rows] = kept
        return bool((after > before).any())

    later: list[Gang] = []  # allowed, but freeing nothing the gang is short of
    for level in levels:
        lists = [
            view.ranked(q, level, cost, now)
            for q in sources
            if not (q == queue and level >= priority)
        ]
        waiting: list[Gang] = []  # useful, but not alone: after those that are
        for n, (_, _, g) in enumerate(heapq.merge(*lists, key=lambda r: (r[0], r[1]))):
            if _amount(g, w) <= 0:
                later.append(g)
            elif free is not None and n < ROOM_FIRST_SCAN and not makes_room(g):
                waiting.append(g)
            elif rule := allowed(g):
                yield g, rule
        while waiting:
            now_useful = [g for g in waiting if makes_room(g)] or waiting
            for g in now_useful:
                if rule := allowed(g):
                    yield g, rule
            done = {g.key for g in now_useful}
            waiting = [g for g in waiting if g.key not in done]
    for g in later:
        if rule := allowed(g):
            yield g, rule


def _rule(
    g: Gang, queue: str, priority: int, share: dict[str, int], view: ClusterView
) -> str | None:
    """Why gangs like ``g`` (its queue, GPU model, resources and priority) may be evicted, or
    None (``share``: its queue's deserved share)."""
    if g.queue == queue:
        return f"preempt: same queue, priority {g.priority} < {priority}"
    relevant = _relevant(g, share)
    if not relevant:
        uses = " or ".join(_asks(g.total)) or "anything"
        return f"reclaim: queue {g.queue} has no deserved share of {uses}"
    hit = next((k for k in relevant if view.used(g.queue, k) > share[k]), None)
    if hit is None:
        return None
    used, limit = view.used(g.queue, hit), share[hit]
    return (
        f"reclaim: queue {g.queue} uses {amount_said(hit, used)} > deserved "
        f"{amount_said(hit, limit)}"
    )


def _bound(w: Workload, view: ClusterView, sources: dict[str, dict[str, int]]) -> int:
    """At most what evicting every candidate could give back of what ``w`` is short of."""
    key = quota_key(w.gpu_type) if w.per_pod.gpus else "cpu"
    return sum(view.used(q, key) for q in sources)


Gone = dict[str, dict[str, int]]
"""Queue → quota key → what the victims taken so far from that queue hold."""


def _gone_below(view: ClusterView, q: str, key: str, gone: Gone) -> int:
    inside = view.subtree(q)
    return sum(amounts.get(key, 0) for x, amounts in gone.items() if x in inside)


def over_capability(
    w: Workload, view: ClusterView, queue: str, gone: Gone | None = None, *, empty: bool = False
) -> list[tuple[str, str, int, int]]:
    """``(queue, key, used, capability)`` for each queue (``queue`` and its parents) whose
    capability ``w`` would exceed once ``gone`` is (``empty``: with nothing else running —
    whether it can ever be admitted). Only what the gang requests is checked, as the capacity
    plugin checks it (``LessEqualWithDimensionAndResourcesName`` over the request's
    dimensions): a CPU-only gang is not held back by a queue over its memory capability."""
    out = []
    for q, key, cap in view.capabilities(queue, quota_keys(w.gpu_type, w.per_pod.gpus)):
        if w.total(key) <= 0:
            continue
        used = 0 if empty else view.used(q, key)
        if gone:
            used -= _gone_below(view, q, key, gone)
        if used + w.total(key) > cap:
            out.append((q, key, used, cap))
    return out


def _still_over(view: ClusterView, queue: str, gone: Gone, gang: Gang) -> bool:
    """``gang`` may still go once ``gone`` is: it is ``queue``'s own (preempt), or its queue
    sets no deserved share of what it uses, or still uses more than that share of one of them
    (Volcano's reclaim re-counts after every victim: it never takes a queue below its share)."""
    if gang.queue == queue:
        return True
    share = view.deserved(gang.queue)
    taken = gone.get(gang.queue, {})
    relevant = _relevant(gang, share)
    return not relevant or any(
        view.used(gang.queue, k) - taken.get(k, 0) > share[k] for k in relevant
    )


def _keeps_guarantee(view: ClusterView, queue: str, gone: Gone, gang: Gang) -> bool:
    """Reclaiming ``gang`` once ``gone`` is leaves its queue at or above its guarantee
    (``checkGuaranteeConstraint``, on the victim's own queue, as the plugin checks it; a gang
    preempted within ``queue`` leaves the queue's usage to the preemptor)."""
    if gang.queue == queue:
        return True
    q = gang.queue
    taken = gone.get(q, {})
    for key, floor in view.state.queues[q].guarantee.items():
        if key in VOLCANO_KEYS and view.used(q, key) - taken.get(key, 0) - gang.total(key) < floor:
            return False
    return True


def _fits(w: Workload, view: ClusterView, queue: str, gone: Gone, free: Ints) -> Assignment | None:
    """Where ``w`` goes once ``gone`` is (``free``: the nodes then), if anywhere."""
    if over_capability(w, view, queue, gone):
        return None
    counts = fit(view, w.per_pod, w.gpu_type, free=free)
    pod = pod_shape(w.per_pod, w.gpu_type)
    return assign(view, counts, w.pods, within=w.within, pod=pod, free=free)


def _amount(g: Gang, w: Workload) -> int:
    """What evicting ``g`` gives back of what ``w`` is short of (its GPUs of the model, or CPU)."""
    if not w.per_pod.gpus:
        return g.per_pod.cpu * g.pods
    return g.per_pod.gpus * g.pods if w.gpu_type in (None, g.gpu_type) else 0


def plan_preemption(
    w: Workload, view: ClusterView, *, queue: str, priority: int, now: datetime
) -> Preemption | None:
    """The fewest whole gangs Volcano would evict to let ``w`` fit in ``view`` (see the module
    docstring for the rules), or None when no set it may evict does. A gang whose Job carries
    a ``networkTopology`` gets victims by reclaim only (:func:`unacted_preemption` says what
    preempting within its queue would have done)."""
    sources = _sources(w, queue, view, preempt=not w.carries_topology)
    plan, blocked = _plan(w, view, queue, priority, now, sources)
    if plan is None and blocked:  # a victim taken earlier may have used up a queue's excess
        plan, _ = _plan(w, view, queue, priority, now, sources, room_first=True)
    return plan


def unacted_preemption(
    w: Workload, view: ClusterView, *, queue: str, priority: int, now: datetime
) -> Preemption | None:
    """For a gang whose Job carries a ``networkTopology`` and for which Volcano will evict
    nobody: the evictions that would make room if the preempt action did not skip it —
    :attr:`Preemption.volcano_acts` False, with the reason — or None."""
    shown, _ = _plan(w, view, queue, priority, now, _sources(w, queue, view))
    if shown is None:
        return None
    return Preemption(shown.victims, shown.assignment, False, NO_PREEMPT_WITH_TOPOLOGY)


def _plan(
    w: Workload,
    view: ClusterView,
    queue: str,
    priority: int,
    now: datetime,
    sources: dict[str, dict[str, int]],
    *,
    room_first: bool = False,
) -> tuple[Preemption | None, bool]:
    """The plan (see :func:`plan_preemption`) and whether a candidate was refused because
    victims taken before it brought its queue down to its deserved share or guarantee — then
    another order (``room_first``: victims that make room on their nodes first, as Volcano
    evicts node by node) may find one where this did not. The first order is the cheap one;
    the other reads up to :data:`ROOM_FIRST_SCAN` candidates of each priority level ahead."""
    col, need = (2, w.per_pod.gpus * w.pods) if w.per_pod.gpus else (0, w.per_pod.cpu * w.pods)
    usable = view.ever_mask(w.per_pod, w.gpu_type)
    room = int(view.free[usable, col].sum())
    if not sources or room + _bound(w, view, sources) < need:
        return None, False  # even evicting every candidate would not free enough
    rules: dict[str, str] = {}
    taken: list[Gang] = []
    found = None
    free = view.free.copy()
    slots = fit(view, w.per_pod, w.gpu_type, free=free)
    total = int(slots.sum())  # pods of the gang's shape the nodes could take, anywhere
    check_at = w.pods  # the full check once that many fit; after a miss, half a gang more
    gone: Gone = {}
    blocked = False
    order = _candidates(w, queue, priority, view, now, sources, free if room_first else None)
    for g, rule in order:
        if not _still_over(view, queue, gone, g) or not _keeps_guarantee(view, queue, gone, g):
            blocked = blocked or g.queue in gone
            continue
        taken.append(g)
        add_request(gone.setdefault(g.queue, {}), g)
        rules[g.key] = rule
        view.give_back(free, g)
        room += _amount(g, w)
        rows = view.rows(g)[0]
        now_there = fit(view, w.per_pod, w.gpu_type, free=free, rows=rows)
        total += int(now_there.sum() - slots[rows].sum())
        slots[rows] = now_there
        if total < check_at:
            continue  # too few pod slots yet, wherever they are: skip the full check
        found = _fits(w, view, queue, gone, free)
        if found:
            break
        check_at = total + max(w.pods // 2, 1)
    if found is None:
        found = _fits(w, view, queue, gone, free) if taken and room >= need else None
    if found is None:
        return None, blocked
    for g in reversed(list(taken)):  # keep only what is needed
        if len(taken) == 1 or room - _amount(g, w) < need:
            continue
        rows, amounts = view.rows(g)
        trial = free.copy()  # what the others free: this one's share taken back out
        trial[rows] = np.maximum(trial[rows] - amounts, view.free[rows])
        add_request(gone[g.queue], g, -1)
        if not set(rows.tolist()) & found.nodes.keys():  # the placement does not need it
            again = None if over_capability(w, view, queue, gone) else found
        else:
            again = _fits(w, view, queue, gone, trial)
        if again:
            taken, found, free = [t for t in taken if t is not g], again, trial
            room -= _amount(g, w)
        else:
            add_request(gone[g.queue], g)
    victims = tuple(Victim(g, rules[g.key], lost_gpu_hours(g, now)) for g in taken)
    return Preemption(victims, found, volcano_acts=True), blocked
