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
checkpoint, from lineage when known), then the set is pruned to what is needed.

Where Volcano differs, the plan says so rather than pretending: its network-topology-aware
scheduling in ``hard`` mode does not preempt, so a gang that must stay within a tier waits even
when evicting would make room (:attr:`Preemption.volcano_acts` is False).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from gangway.capacity import Assignment, ClusterView, Ints, assign, fit, quota_keys
from gangway.snapshot.model import Gang
from gangway.workload import Workload

__all__ = ["Preemption", "Victim", "lost_gpu_hours", "over_capability", "plan_preemption"]

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


def _eligible(w: Workload, queue: str, priority: int, view: ClusterView, gang: Gang) -> str | None:
    """The rule under which ``gang`` may be evicted for ``w``, or None."""
    if gang.phase != "Running" or not gang.placement:
        return None
    if gang.queue == queue:
        if gang.priority < priority:
            return f"preempt: same queue, priority {gang.priority} < {priority}"
        return None
    q = view.state.queues.get(gang.queue)
    if q is None or not q.reclaimable:
        return None
    mine = view.state.queues.get(queue)
    for key in quota_keys(w.gpu_type, w.per_pod.gpus):
        deserved = mine.deserved.get(key) if mine is not None else None
        if deserved is not None and view.used(queue, key) + w.total(key) > deserved:
            return None  # reclaim only up to the reclaiming queue's deserved share
    for key in quota_keys(gang.gpu_type, gang.per_pod.gpus):
        used = view.used(gang.queue, key)
        if key in q.deserved and used > q.deserved[key]:
            return f"reclaim: queue {gang.queue} uses {used} {key} > deserved {q.deserved[key]}"
    return None


def over_capability(
    w: Workload, view: ClusterView, queue: str, victims: Sequence[Gang] = ()
) -> list[tuple[str, str, int, int]]:
    """``(queue, key, used, capability)`` for each queue (``queue`` and its parents) whose
    capability ``w`` would exceed once ``victims`` are gone."""
    out = []
    for q in view.state.ancestors(queue):
        inside = view.state.subtree(q)
        for key in quota_keys(w.gpu_type, w.per_pod.gpus):
            cap = view.state.queues[q].capability.get(key)
            if cap is None:
                continue
            used = view.used(q, key) - sum(g.total(key) for g in victims if g.queue in inside)
            if used + w.total(key) > cap:
                out.append((q, key, used, cap))
    return out


def _keeps_guarantee(view: ClusterView, queue: str, taken: Sequence[Gang], gang: Gang) -> bool:
    """Reclaiming ``gang`` after ``taken`` leaves every queue at or above its guarantee (a
    gang preempted within ``queue`` leaves the queue's usage to the preemptor)."""
    if gang.queue == queue:
        return True
    mine = set(view.state.ancestors(queue))
    for q in view.state.ancestors(gang.queue):
        if q in mine:  # a common parent keeps what moves between its children
            continue
        guarantee = view.state.queues[q].guarantee
        for key, floor in guarantee.items():
            inside = view.state.subtree(q)
            gone = sum(g.total(key) for g in (*taken, gang) if g.queue in inside)
            if view.used(q, key) - gone < floor:
                return False
    return True


def _freed(view: ClusterView, victims: Sequence[Gang]) -> Ints:
    free = view.free.copy()
    index = view.node_index()
    for g in victims:
        shape = np.array((g.per_pod.cpu, g.per_pod.memory, g.per_pod.gpus), dtype=np.int64)
        for node, k in g.placement.items():
            if node in index:
                free[index[node]] += k * shape
    return free


def _fits(w: Workload, view: ClusterView, queue: str, victims: Sequence[Gang]) -> Assignment | None:
    if over_capability(w, view, queue, victims):
        return None
    counts = fit(view, w.per_pod, w.gpu_type, free=_freed(view, victims))
    return assign(view, counts, w.pods, within=w.within)


def plan_preemption(
    w: Workload, view: ClusterView, *, queue: str, priority: int, now: datetime
) -> Preemption | None:
    """The fewest whole gangs whose eviction lets ``w`` fit in ``view`` (see the module
    docstring for the rules), or None when no allowed set does."""
    rules = {}
    for g in view.state.gangs:
        rule = _eligible(w, queue, priority, view, g)
        if rule:
            rules[g.name] = (g, rule)
    ranked = sorted(
        rules.values(),
        key=lambda gr: (gr[0].priority, lost_gpu_hours(gr[0], now) or 0.0, gr[0].name),
    )
    taken: list[Gang] = []
    found = None
    for g, _rule in ranked:
        if not _keeps_guarantee(view, queue, [t for t in taken if t.queue != queue], g):
            continue
        taken.append(g)
        found = _fits(w, view, queue, taken)
        if found:
            break
    if not found:
        return None
    for g in reversed(list(taken)):  # keep only what is needed
        rest = [t for t in taken if t is not g]
        again = _fits(w, view, queue, rest) if rest else None
        if again:
            taken, found = rest, again
    victims = tuple(Victim(g, rules[g.name][1], lost_gpu_hours(g, now)) for g in taken)
    hard = w.within is not None
    return Preemption(victims, found, volcano_acts=not hard, note=HARD_TOPOLOGY if hard else None)
