"""Whether a gang can be admitted — now, after evictions, later, or never — and why.

``admit(workload, snapshot)`` checks, in order, and stops at the first that settles it:

1. **Who and what** (reject, with the field to change): the team exists; its queue exists; the
   priority class exists and the team may use it; the GPU model exists and the team's quota
   names it; the shape is sane (at least one pod, no pod larger than any node).
2. **Ever** (reject, per cluster): the gang is within its queue's capability (and every parent
   queue's), and some topology domain (at the allowed tier, else the whole cluster) has
   enough whole nodes of the model, counting what is allocatable, not what is free.
3. **Now**: within the capability left by what its queue already runs (else *wait* for the
   named amount to be released), and free whole nodes in one domain (*admit*, with the domain
   and nodes). Else the evictions Volcano would make (:mod:`gangway.scheduling.preemption`:
   *preempt*, listing the gangs and their cost), else *wait*, saying exactly for what (``8 × H100
   free in one rack; largest now: 5``).

Every cluster gets a verdict; the workload's is the best of them (admit > preempt > wait >
reject). :func:`gangway.scheduling.placement.place` ranks the clusters that share the best verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import IntEnum, StrEnum

import numpy as np

from gangway.errors import FieldError, closest
from gangway.scheduling.capacity import (
    Assignment,
    ClusterView,
    SnapshotView,
    assign,
    fit,
    pod_shape,
    view_of,
)
from gangway.scheduling.preemption import (
    Preemption,
    over_capability,
    plan_preemption,
    reclaim_refusal,
    unacted_preemption,
)
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.scheduling.workload import Workload
from gangway.units import amount, amount_said

__all__ = [
    "MAX_PODS",
    "ClusterDecision",
    "Decision",
    "Verdict",
    "WaitsFor",
    "admit",
    "admit_in",
    "in_cluster",
]

MAX_PODS = 1_000_000


class Verdict(IntEnum):
    """Best first."""

    ADMIT = 0
    PREEMPT = 1
    WAIT = 2
    REJECT = 3

    def __str__(self) -> str:
        return self.name.lower()


class WaitsFor(StrEnum):
    """What a *wait* verdict waits for (its reason says it in words)."""

    QUOTA = "quota"
    """Its queue's capability (or a parent's) to be released by what the queue runs."""
    ROOM = "room"
    """Enough free whole nodes inside one allowed topology domain (the cluster at widest)."""


@dataclass(frozen=True)
class ClusterDecision:
    cluster: str
    verdict: Verdict
    reason: str
    assignment: Assignment | None = None
    plan: Preemption | Callable[[], Preemption | None] | None = None
    """The evictions that would make room — also on a *wait* where Volcano will not make them
    (:attr:`Preemption.volcano_acts` False): those cannot change the verdict, so they are
    worked out when first asked for."""
    waits_for: WaitsFor | None = None
    """For a *wait*: quota or room (see :class:`WaitsFor`); None for any other verdict."""

    @property
    def preemption(self) -> Preemption | None:
        """The evictions (see :mod:`gangway.scheduling.preemption`); one Volcano will not make
        is worked out on first reading, over the cluster as it is then."""
        if callable(self.plan):
            object.__setattr__(self, "plan", self.plan())
        return self.plan  # type: ignore[return-value]


@dataclass(frozen=True)
class Decision:
    workload: Workload
    """With its queue and priority class resolved."""
    verdict: Verdict
    problems: tuple[FieldError, ...] = ()
    clusters: tuple[ClusterDecision, ...] = ()

    @property
    def reason(self) -> str:
        if self.problems:
            return "; ".join(str(p) for p in self.problems)
        best = [c for c in self.clusters if c.verdict == self.verdict]
        return best[0].reason if best else ""


def _resolve(
    w: Workload, snap: Snapshot, views: Mapping[str, ClusterView]
) -> tuple[Workload, list[FieldError]]:
    """``w`` with its queue and priority class defaulted from its team; what is wrong with it."""
    problems: list[FieldError] = []
    team = snap.teams.get(w.team) if w.team else None
    if w.team and team is None:
        known = ", ".join(sorted(snap.teams)) or "none"
        problems.append(FieldError(w.path_of("team"), f"no team {w.team!r} (known: {known})"))
    queue = w.queue or (team.queue if team else None)
    cls = w.priority_class or (team.priority_classes[0] if team else snap.default_priority_class)
    w = replace(w, queue=queue, priority_class=cls)
    if queue is None:
        problems.append(FieldError(w.path_of("queue"), "no queue: name a team or a queue"))
    elif not any(queue in c.queues for c in snap.clusters.values()):
        problems.append(FieldError(w.path_of("queue"), f"no queue {queue!r} in any cluster"))
    if cls and snap.priority_classes and cls not in snap.priority_classes:
        known = ", ".join(sorted(snap.priority_classes))
        problems.append(
            FieldError(w.path_of("priority_class"), f"no priority class {cls!r} ({known})")
        )
    elif cls and team and cls not in team.priority_classes:
        may = ", ".join(team.priority_classes)
        problems.append(FieldError(w.path_of("priority_class"), f"team {w.team} may use {may}"))
    w, wrong_model = _model(w, views, team.gpu_types if team else None)
    return w, problems + wrong_model + _shape_problems(w, snap)


def _shape_problems(w: Workload, snap: Snapshot) -> list[FieldError]:
    out = []
    if not 1 <= w.pods <= MAX_PODS:
        out.append(FieldError(w.path_of("pods"), f"{w.pods} pods: a gang has 1 to {MAX_PODS:,}"))
    p = w.per_pod
    if not (p.cpu or p.memory or p.gpus):
        out.append(
            FieldError(w.path_of("per_pod"), "requests nothing: give each pod CPU, memory or GPUs")
        )
    tiers = {t for c in snap.clusters.values() for t in c.tiers}
    if w.within and w.within not in tiers:
        out.append(
            FieldError(
                w.path_of("within"),
                f"no topology tier {w.within!r} ({_list(tiers)}){_near(w.within, tiers)}",
            )
        )
    return out


def _model(
    w: Workload, views: Mapping[str, ClusterView], allowed: list[str] | None
) -> tuple[Workload, list[FieldError]]:
    """``w`` with its GPU model resolved (the team's only one, when it names none), or what is
    wrong with the model it names."""
    where = w.path_of("gpu_type")
    models = {t for v in views.values() for t in v.types if t}
    usable = models & set(allowed) if allowed is not None else models
    if w.gpu_type and not w.per_pod.gpus:
        why = f"names GPU model {w.gpu_type} but the pods request no GPUs"
        return w, [FieldError(where, f"{why} ({w.path_of('per_pod')}): request GPUs or drop it")]
    if w.gpu_type and w.gpu_type not in models:
        near = _near(w.gpu_type, models)
        return w, [
            FieldError(where, f"no {w.gpu_type} GPUs in any cluster ({_list(models)}){near}")
        ]
    if w.gpu_type and allowed is not None and w.gpu_type not in allowed:
        return w, [FieldError(where, f"team {w.team}'s quota names {_list(set(allowed))}")]
    if w.per_pod.gpus and not w.gpu_type:
        if len(usable) == 1:
            return replace(w, gpu_type=next(iter(usable))), []
        return w, [FieldError(where, f"the pods request GPUs: name the model ({_list(usable)})")]
    return w, []


def _near(name: str, known: set[str]) -> str:
    """`` (did you mean 'X'?)`` for a near or differently-cased name, else nothing."""
    near = closest(name, known)
    return f" (did you mean {near!r}?)" if near else ""


def _list(names: set[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def _largest(view: ClusterView, counts: np.ndarray, within: str | None) -> tuple[str, int]:
    """The widest allowed scope's name and the most pods one domain of it can take."""
    tiers = view.state.tiers
    if within is None or within not in tiers:
        return "the cluster", int(counts.sum())
    t = tiers.index(within)
    return f"one {within}", int(np.bincount(view.domains[t], weights=counts).max(initial=0))


def admit_in(
    w: Workload,
    view: ClusterView,
    *,
    priority: int,
    preempting: bool,
    now: datetime,
    may_preempt: tuple[str, ...] = (),
) -> ClusterDecision:
    """The verdict for ``w`` (queue and priority resolved) in one cluster (``may_preempt``:
    the classes the team may use that may evict others, for a class that may not)."""
    name, state, queue = view.name, view.state, str(w.queue)
    what = (
        f"{w.per_pod.gpus} × {w.gpu_type or 'GPU'}"
        if w.per_pod.gpus
        else f"{amount('cpu', w.per_pod.cpu)} CPU, {amount('memory', w.per_pod.memory)}"
    )
    if queue not in state.queues:
        return ClusterDecision(name, Verdict.REJECT, f"no queue {queue} in {name}")
    if len(view.subtree(queue)) > 1:  # cached: no scan of the queues on every decision
        children = sorted(n for n, q in state.queues.items() if q.parent == queue)
        reason = (
            f"queue {queue} has child queues ({', '.join(children)}): with hierarchical queues "
            "Volcano's capacity plugin runs jobs only in leaf queues — submit to one of them"
        )
        return ClusterDecision(name, Verdict.REJECT, reason)
    if w.gpu_type and w.per_pod.gpus and not view.has_type(w.gpu_type):
        return ClusterDecision(name, Verdict.REJECT, f"no {w.gpu_type} nodes in {name}")
    if w.within and w.within not in state.tiers:
        return ClusterDecision(name, Verdict.REJECT, f"{name} has no {w.within} tier")
    if view.ever(w.per_pod, w.gpu_type, w.pods, w.within) is None:
        ever = fit(view, w.per_pod, w.gpu_type, free=view.allocatable)
        scope, most = _largest(view, ever, w.within)
        reason = f"needs {_pods(w.pods)} of {what} in {scope}; at most {most} ever fit"
        return ClusterDecision(name, Verdict.REJECT, reason)
    never = [(q, k, cap) for q, k, _used, cap in over_capability(w, view, queue, empty=True)]
    if never:
        q, k, cap = never[0]
        need = amount_said(k, w.total(k))
        reason = f"needs {need}, more than queue {q}'s capability ({amount_said(k, cap)})"
        return ClusterDecision(name, Verdict.REJECT, reason)
    over = over_capability(w, view, queue)
    counts = fit(view, w.per_pod, w.gpu_type)
    pod = pod_shape(w.per_pod, w.gpu_type)
    placed = None if over else assign(view, counts, w.pods, within=w.within, pod=pod)
    if placed is not None:
        return ClusterDecision(name, Verdict.ADMIT, _where(placed), assignment=placed)

    plan = (
        plan_preemption(w, view, queue=queue, priority=priority, now=now, counts=counts)
        if preempting
        else None
    )
    if plan is not None:
        gangs = ", ".join(v.gang.name for v in plan.victims)
        return ClusterDecision(
            name, Verdict.PREEMPT, f"evicting {gangs} makes room", plan.assignment, plan
        )
    if over:
        q, k, used, cap = max(over, key=lambda o: o[2] + w.total(o[1]) - o[3])
        short = used + w.total(k) - cap
        reason = (
            f"queue {q} holds {amount_said(k, used)} of its capability of {amount_said(k, cap)} "
            f"and the gang needs {amount_said(k, w.total(k))}: waits for "
            f"{amount_said(k, short)} to be released"
        )
    else:
        scope, most = _largest(view, counts, w.within)
        reason = f"waits for {_pods(w.pods)} of {what} free in {scope}; largest now: {most}"
    why = _no_evictions(w, view, queue, priority, preempting, may_preempt)
    unacted: Callable[[], Preemption | None] | None = None
    if preempting and w.carries_topology:

        def unacted() -> Preemption | None:
            return unacted_preemption(w, view, queue=queue, priority=priority, now=now)

    waits_for = WaitsFor.QUOTA if over else WaitsFor.ROOM
    return ClusterDecision(
        name, Verdict.WAIT, f"{reason}. {why}", plan=unacted, waits_for=waits_for
    )


def _pods(n: int) -> str:
    return f"{n} pod{'' if n == 1 else 's'}"


def _no_evictions(
    w: Workload,
    view: ClusterView,
    queue: str,
    priority: int,
    preempting: bool,
    may_preempt: tuple[str, ...],
) -> str:
    """Why no eviction lets a waiting gang start, naming the rule and what would change it."""
    if not preempting:
        also = f"; the team's class(es) {', '.join(may_preempt)} may" if may_preempt else ""
        return (
            f"Evictions: none — priority class {w.priority_class} may not evict others "
            f"(preemptionPolicy: Never){also}"
        )
    if w.carries_topology:
        preempt = "preempt skips a Job that carries a networkTopology (volcano#4374)"
    elif any(p < priority for p in view.running.get(queue, {})):
        preempt = f"preempt may take queue {queue}'s gangs of priority below {priority}"
    else:
        preempt = f"preempt: no gang of priority below {priority} runs in queue {queue}"
    refusal = reclaim_refusal(w, queue, view)
    reclaim = (
        f"reclaim: {refusal}"
        if refusal
        else "reclaim may take gangs of other queues over their deserved share"
    )
    return f"Evictions considered ({preempt}; {reclaim}): none that Volcano may make frees enough"


def _where(a: Assignment) -> str:
    nodes = len(a.nodes)
    scope = f"in {a.tier} {a.domain}" if a.tier else "across the cluster"
    return f"fits now {scope} on {nodes} node(s)"


def in_cluster(w: Workload, view: ClusterView) -> Workload:
    """``w`` with a tier given by number (a Job's hard ``networkTopology``) named as this
    cluster names it; beyond its widest tier, no constraint."""
    tiers = view.state.tiers
    if w.within is None and w.max_tier is not None and 1 <= w.max_tier <= len(tiers):
        return replace(w, within=tiers[w.max_tier - 1])
    return w


def admit(
    workload: Workload, snapshot: Snapshot | SnapshotView, *, cluster: str | None = None
) -> Decision:
    """The admission decision for ``workload`` over ``snapshot`` (every cluster, or one); a
    :class:`~gangway.scheduling.capacity.SnapshotView` saves building the clusters' arrays
    again for each decision over one snapshot."""
    view = view_of(snapshot)
    all_views = view.clusters
    snapshot = view.snapshot
    w, problems = _resolve(workload, snapshot, all_views)
    if problems:
        return Decision(w, Verdict.REJECT, tuple(problems))
    cls = snapshot.priority_classes.get(str(w.priority_class))
    priority, preempting = (cls.value, cls.preempting) if cls else (0, True)
    if cluster is not None and cluster not in all_views:
        known = ", ".join(sorted(all_views))
        return Decision(w, Verdict.REJECT, (FieldError("cluster", f"no {cluster!r} ({known})"),))
    chosen = [all_views[cluster]] if cluster else list(all_views.values())
    team = snapshot.teams.get(w.team) if w.team else None
    may_preempt = tuple(
        c
        for c in (team.priority_classes if team else ())
        if (info := snapshot.priority_classes.get(c)) is not None and info.preempting
    )
    rows = tuple(
        admit_in(
            in_cluster(w, v),
            v,
            priority=priority,
            preempting=preempting,
            now=snapshot.taken_at,
            may_preempt=may_preempt,
        )
        for v in chosen
    )
    return Decision(w, min(r.verdict for r in rows), (), rows)
