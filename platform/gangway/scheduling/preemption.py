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
    every victim (the plugin's ``allocations``) — in some order: the action walks nodes and
    their pods in Go map order, which changes from one scheduling cycle to the next, so a set
    that some order allows (the largest victim last) is one it gets to — and never below its
    own guarantee (``checkGuaranteeConstraint``);
  - the action has no topology check: a Job with a ``networkTopology`` reclaims.
* **whole gangs** (``gang`` plugin): Volcano evicts pod by pod — the rendered scheduler config
  turns the gang plugin's preemptable check off — and the Job's ``PodEvicted → RestartJob``
  policy then restarts every pod of a victim, so a victim costs its whole gang: the plan counts
  each victim whole.
* a class with ``preemptionPolicy: Never`` (``preemptible: false`` in the platform config)
  waits instead of evicting anyone.

Which of the gangs these rules allow are evicted is :mod:`gangway.scheduling.victims`'s
search, node by node as Volcano evicts: on each node the victims that give back what the gang
is short of (its GPU model, or CPU) come first — one that frees nothing the gang needs would
only lower its queue's use and could stop a useful one from being reclaimed — then lowest
priority, cheapest (GPU-hours lost since the last checkpoint, from lineage when known; an
unknown loss after every known one), then by name; the nodes where that frees a pod slot for
the least (highest priority evicted, then loss, then victims per slot) go first, so no
verdict depends on the gangs' names. The set is then pruned to what is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from gangway.scheduling.candidates import kept_table
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
from gangway.scheduling.victims import VictimTable, search, victim_table
from gangway.scheduling.workload import Workload
from gangway.units import VOLCANO_KEYS, amount_said, quota_keys

__all__ = [
    "Preemption",
    "Victim",
    "lost_gpu_hours",
    "may_reclaim",
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


def may_reclaim(w: Workload, queue: str, view: ClusterView) -> bool:
    """Whether ``queue`` (one of ``view``'s) is within its deserved share of some resource
    ``w`` requests once ``w`` runs — :func:`reclaim_refusal`'s verdict, without its words."""
    if queue not in view.state.queues:
        return False
    share = view.deserved(queue)
    return any(view.used(queue, k) + w.total(k) <= share.get(k, 0) for k in _asks(w.total))


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
    if may_reclaim(w, queue, view):
        return None  # the words below only when refused: this is asked for every decision
    future = {k: view.used(queue, k) + w.total(k) for k in asks}
    over = [f"{amount_said(k, future[k])} > {amount_said(k, share.get(k, 0))}" for k in asks]
    return (
        f"queue {queue} may not reclaim from other queues: with this gang it would be over its "
        f"deserved share of every resource the gang requests ({'; '.join(over)}), and Volcano "
        "reclaims only for a queue within its share of at least one"
    )


def _rule(g: Gang, queue: str, priority: int, view: ClusterView) -> str | None:
    """Why ``g`` may be evicted for a gang of ``queue`` at ``priority``, or None."""
    if g.queue == queue:
        return f"preempt: same queue, priority {g.priority} < {priority}"
    return _reclaim_rule(g, view)


def _reclaim_rule(g: Gang, view: ClusterView) -> str | None:
    """Why reclaim may take gangs like ``g`` (its queue, GPU model and the resources it uses)
    for another queue, or None: its queue must be reclaimable, and set no deserved share of
    what ``g`` uses or be over that share on one of them."""
    q = view.state.queues.get(g.queue)
    if q is None or not q.reclaimable:
        return None
    share = view.deserved(g.queue)
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


@dataclass(frozen=True)
class _Table:
    """A view's gangs as eviction candidates, and which of them reclaim may take (the same
    for every gang that may reclaim: it depends on the victims' queues only)."""

    table: VictimTable
    reclaimable: npt.NDArray[np.bool_]


def _table(view: ClusterView, now: datetime) -> _Table:
    def build() -> _Table:
        t, kind, example = kept_table(view, now)
        ok = np.zeros(max(example, default=-1) + 1, dtype=bool)
        for code in np.unique(kind).tolist():
            ok[code] = _reclaim_rule(example[code], view) is not None
        return _Table(t, ok[kind])

    out = view.memo(("victims", now), build)
    assert isinstance(out, _Table)
    return out


def rebuilt_table(view: ClusterView, now: datetime) -> _Table:
    """:func:`_table` built afresh from every running gang, as it was before the table was
    kept (:mod:`gangway.scheduling.candidates`): the reference the kept one is checked
    against."""
    t = victim_table(view, now, lost_gpu_hours)
    kinds: dict[tuple[str, str | None, bool, bool, bool], bool] = {}
    ok = np.zeros(len(t.gangs), dtype=bool)
    for i, g in enumerate(t.gangs):
        p = g.per_pod
        kind = (g.queue, g.gpu_type, bool(p.gpus), bool(p.cpu), bool(p.memory))
        if kind not in kinds:
            kinds[kind] = _reclaim_rule(g, view) is not None
        ok[i] = kinds[kind]
    return _Table(t, ok)


@dataclass
class _Queues:
    """The queue rules a victim must pass as victims are taken (:class:`victims.Ledger`)."""

    view: ClusterView
    queue: str
    gone: Gone
    members: dict[str, list[Gang]] = field(default_factory=dict)
    """Victims taken so far, by queue."""

    def admits(self, gang: Gang) -> bool:
        if gang.queue == self.queue:
            return True
        together = [*self.members.get(gang.queue, []), gang]
        return _keeps_guarantee(self.view, self.queue, self.gone, gang) and _in_some_order(
            self.view, gang.queue, together
        )

    def take(self, gang: Gang, sign: int = 1) -> None:
        add_request(self.gone.setdefault(gang.queue, {}), gang, sign)
        members = self.members.setdefault(gang.queue, [])
        if sign > 0:
            members.append(gang)
        else:
            members[:] = [g for g in members if g.key != gang.key]


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


def _in_some_order(view: ClusterView, q: str, victims: list[Gang]) -> bool:
    """Some order of reclaiming ``victims`` (all of queue ``q``) passes the capacity plugin's
    rule: each, when its turn comes, belongs to a queue that sets no deserved share of what
    it uses, or still uses more than that share of one of them (the plugin re-counts after
    every victim, so it never takes a queue below its share). Volcano's reclaim walks nodes
    and their pods in Go map order, different from one scheduling cycle to the next, so a set
    some order allows is one it gets to. Worked out from the last: a victim that may go with
    every other one gone already is put last, and the rest ordered the same way (one that may
    go last still may once another is put after it)."""
    share = view.deserved(q)
    left = list(victims)
    total = {k: sum(g.total(k) for g in left) for k in VOLCANO_KEYS}

    def may_go_last(g: Gang) -> bool:
        relevant = _relevant(g, share)
        return not relevant or any(
            view.used(q, k) - total[k] + g.total(k) > share[k] for k in relevant
        )

    while left:
        last = next((g for g in left if may_go_last(g)), None)
        if last is None:
            return False
        for k in VOLCANO_KEYS:
            total[k] -= last.total(k)
        left.remove(last)
    return True


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


def plan_preemption(
    w: Workload,
    view: ClusterView,
    *,
    queue: str,
    priority: int,
    now: datetime,
    counts: Ints | None = None,
) -> Preemption | None:
    """The whole gangs Volcano would evict to let ``w`` fit in ``view`` (see the module
    docstring for the rules, :mod:`gangway.scheduling.victims` for how they are chosen), or
    None when no set it may evict does. A gang whose Job carries a ``networkTopology`` gets
    victims by reclaim only (:func:`unacted_preemption` says what preempting within its queue
    would have done). ``counts``: :func:`~gangway.scheduling.capacity.fit` of ``w`` now, when
    the caller has it."""
    return _plan(w, view, queue, priority, now, preempt=not w.carries_topology, counts=counts)


def unacted_preemption(
    w: Workload, view: ClusterView, *, queue: str, priority: int, now: datetime
) -> Preemption | None:
    """For a gang whose Job carries a ``networkTopology`` and for which Volcano will evict
    nobody: the evictions that would make room if the preempt action did not skip it —
    :attr:`Preemption.volcano_acts` False, with the reason — or None."""
    shown = _plan(w, view, queue, priority, now, preempt=True)
    if shown is None:
        return None
    return Preemption(shown.victims, shown.assignment, False, NO_PREEMPT_WITH_TOPOLOGY)


def _plan(
    w: Workload,
    view: ClusterView,
    queue: str,
    priority: int,
    now: datetime,
    *,
    preempt: bool,
    counts: Ints | None = None,
) -> Preemption | None:
    """The plan (see :func:`plan_preemption`); ``preempt``: victims may come from ``queue``
    itself."""
    if queue not in view.state.queues:
        return None
    lower = preempt and any(p < priority and gs for p, gs in view.running.get(queue, {}).items())
    reclaims = reclaim_refusal(w, queue, view) is None
    if not lower and not reclaims:
        return None  # nobody may be evicted: no need for the table of candidates
    cand = _table(view, now)
    t = cand.table
    allowed = np.zeros(len(t.gangs), dtype=bool)
    own = t.queues.get(queue, -1)
    if preempt:
        allowed |= (t.queue == own) & (t.priority < priority)
    if reclaims:
        allowed |= cand.reclaimable & (t.queue != own)
    if not allowed.any():
        return None
    p = w.per_pod
    if p.gpus:
        code = view.types.get(w.gpu_type, -1) if w.gpu_type else None
        useful = (t.gpus > 0) if code is None else (t.gpus > 0) & (t.gpu_type == code)
    else:
        useful = t.cpu > 0
    over = over_capability(w, view, queue)
    ledger = _Queues(view, queue, {})
    inside = [view.subtree(q) for q, *_ in over]
    found = search(
        view,
        t,
        want=(p.cpu, p.memory, p.gpus),
        pods=w.pods,
        usable=view.ever_mask(p, w.gpu_type),
        counts=fit(view, p, w.gpu_type) if counts is None else counts,
        allowed=allowed,
        useful=useful,
        tier=view.state.tiers.index(w.within) if w.within else None,
        ledger=ledger,
        enough=(lambda: not over_capability(w, view, queue, ledger.gone)) if over else None,
        relieves=lambda g: any(g.queue in s for s in inside),
    )
    if found is None:
        return None
    placed = _fits(w, view, queue, ledger.gone, found.free)
    if placed is None:
        return None
    victims = tuple(
        Victim(g, _rule(g, queue, priority, view) or "", lost_gpu_hours(g, now))
        for g in found.victims
    )
    return Preemption(victims, placed, volcano_acts=True)
