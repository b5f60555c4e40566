"""Which running gangs would make room for a gang that does not fit — and what evicting them
would cost — following Volcano's rules:

* **preempt** (Volcano's ``preempt`` action, ``priority`` plugin): within the gang's own queue,
  only gangs of a lower PriorityClass value;
* **reclaim** (``reclaim`` action, ``capacity`` plugin): from other queues, only while the
  gang's queue stays within its deserved share, only from a reclaimable queue using more than
  its deserved share, and never taking a queue below its guarantee;
* **whole gangs** (``gang`` plugin): a victim is evicted with all its pods, never part of it;
* a class with ``preemptionPolicy: Never`` (``preemptible: false`` in the platform config)
  waits instead of evicting anyone.

Victims are taken lowest priority first, then cheapest (GPU-hours lost since their last
checkpoint, from lineage when known; an unknown loss after every known one), then the set is
pruned to what is needed.

Where Volcano differs, the plan says so rather than pretending: its network-topology-aware
scheduling in ``hard`` mode does not preempt, so a gang that must stay within a tier waits even
when evicting would make room (:attr:`Preemption.volcano_acts` is False).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
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
from gangway.units import quota_key, quota_keys

__all__ = ["Preemption", "Victim", "lost_gpu_hours", "over_capability", "plan_preemption"]

VOLCANO_KEYS = ("cpu", "memory", "gpu")
"""What a Volcano Queue counts (``gpu`` is every model together): the reclaim rules see only
these; per-model keys are Gangway's own capability check."""
HARD_TOPOLOGY = (
    "Volcano's network-topology-aware scheduling does not preempt for a gang that must stay "
    "within a tier (hard mode): it waits, although evicting these would make room"
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


def _sources(w: Workload, queue: str, view: ClusterView) -> dict[str, dict[str, int]]:
    """The queues victims may come from: ``queue`` itself (preempt), and — while ``queue``
    stays within its deserved share — every reclaimable queue over its deserved share
    (reclaim), each with the quota keys it is over by."""
    out: dict[str, dict[str, int]] = {queue: {}}
    mine = view.state.queues.get(queue)
    for key in VOLCANO_KEYS:
        deserved = mine.deserved.get(key) if mine is not None else None
        if deserved is not None and view.used(queue, key) + w.total(key) > deserved:
            return out  # reclaim only up to the reclaiming queue's deserved share
    for name in view.running:
        q = view.state.queues.get(name)
        if name == queue or q is None or not q.reclaimable:
            continue
        over = {
            k: view.used(name, k)
            for k, d in q.deserved.items()
            if k in VOLCANO_KEYS and view.used(name, k) > d
        }
        if over:
            out[name] = over
    return out


def _candidates(
    w: Workload,
    queue: str,
    priority: int,
    view: ClusterView,
    now: datetime,
    sources: dict[str, dict[str, int]],
) -> Iterator[tuple[Gang, str]]:
    """The running gangs that may be evicted for ``w`` (from ``sources``, :func:`_sources`)
    with their rules: lowest priority first, then cheapest to lose, then by name — produced
    lazily, one priority level at a time."""
    levels = sorted(
        {p for q in sources for p in view.running.get(q, {}) if q != queue or p < priority}
    )
    rules: dict[tuple[str, str | None, bool, int], str | None] = {}

    def cost(g: Gang) -> float | None:
        return lost_gpu_hours(g, now)

    for level in levels:
        lists = [
            view.ranked(q, level, cost, now)
            for q in sources
            if not (q == queue and level >= priority)
        ]
        for _, _, g in heapq.merge(*lists, key=lambda r: (r[0], r[1])):
            key = (g.queue, g.gpu_type, bool(g.per_pod.gpus), g.priority)
            if key not in rules:
                rules[key] = _rule(g, queue, priority, sources[g.queue], view)
            rule = rules[key]
            if rule and g.placement:
                yield g, rule


def _rule(
    g: Gang, queue: str, priority: int, over: dict[str, int], view: ClusterView
) -> str | None:
    """Why gangs like ``g`` (its queue, GPU model and priority) may be evicted, or None."""
    if g.queue == queue:
        return f"preempt: same queue, priority {g.priority} < {priority}"
    hit = next((k for k in quota_keys(g.gpu_type, g.per_pod.gpus) if k in over), None)
    if hit is None:
        return None
    limit = view.state.queues[g.queue].deserved[hit]
    return f"reclaim: queue {g.queue} uses {over[hit]} {hit} > deserved {limit}"


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
    whether it can ever be admitted)."""
    out = []
    for q, key, cap in view.capabilities(queue, quota_keys(w.gpu_type, w.per_pod.gpus)):
        used = 0 if empty else view.used(q, key)
        if gone:
            used -= _gone_below(view, q, key, gone)
        if used + w.total(key) > cap:
            out.append((q, key, used, cap))
    return out


def _still_over(view: ClusterView, queue: str, gone: Gone, gang: Gang) -> bool:
    """``gang``'s queue is still over its deserved share once ``gone`` is (Volcano's reclaim
    re-checks after every victim: it never takes a queue below its deserved share)."""
    if gang.queue == queue:
        return True
    q = view.state.queues[gang.queue]
    taken = gone.get(gang.queue, {})
    for key in quota_keys(gang.gpu_type, gang.per_pod.gpus):
        deserved = q.deserved.get(key)
        if key not in VOLCANO_KEYS or deserved is None:
            continue
        if view.used(gang.queue, key) - taken.get(key, 0) > deserved:
            return True
    return False


def _keeps_guarantee(view: ClusterView, queue: str, gone: Gone, gang: Gang) -> bool:
    """Reclaiming ``gang`` once ``gone`` is leaves every queue at or above its guarantee (a
    gang preempted within ``queue`` leaves the queue's usage to the preemptor)."""
    if gang.queue == queue:
        return True
    mine = set(view.ancestors(queue))
    for q in view.ancestors(gang.queue):
        if q in mine:  # a common parent keeps what moves between its children
            continue
        for key, floor in view.state.queues[q].guarantee.items():
            if key not in VOLCANO_KEYS:
                continue
            taken = _gone_below(view, q, key, gone) + gang.total(key)
            if view.used(q, key) - taken < floor:
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
    """The fewest whole gangs whose eviction lets ``w`` fit in ``view`` (see the module
    docstring for the rules), or None when no allowed set does."""
    col, need = (2, w.per_pod.gpus * w.pods) if w.per_pod.gpus else (0, w.per_pod.cpu * w.pods)
    usable = view.ever_mask(w.per_pod, w.gpu_type)
    room = int(view.free[usable, col].sum())
    sources = _sources(w, queue, view)
    if room + _bound(w, view, sources) < need:
        return None  # even evicting every candidate would not free enough
    rules: dict[str, str] = {}
    taken: list[Gang] = []
    found = None
    free = view.free.copy()
    check_at = need  # full checks at room ≥ need, then each time room grows by half again
    gone: Gone = {}
    for g, rule in _candidates(w, queue, priority, view, now, sources):
        if not _still_over(view, queue, gone, g) or not _keeps_guarantee(view, queue, gone, g):
            continue
        taken.append(g)
        add_request(gone.setdefault(g.queue, {}), g)
        rules[g.key] = rule
        view.give_back(free, g)
        room += _amount(g, w)
        if room < check_at:
            continue  # not enough freed yet, wherever it lands: skip the full check
        found = _fits(w, view, queue, gone, free)
        if found:
            break
        check_at = room + max(need // 2, 1)
    if found is None:
        found = _fits(w, view, queue, gone, free) if taken and room >= need else None
    if found is None:
        return None
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
    hard = w.within is not None
    return Preemption(victims, found, volcano_acts=not hard, note=HARD_TOPOLOGY if hard else None)
