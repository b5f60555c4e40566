"""Which cluster — and inside it which topology domain — a gang should go to, with the ranked
alternatives and the reasons for each.

Clusters are filtered by :func:`gangway.scheduling.admission.admit` (hardware, capability,
whole-gang fit) and ranked by verdict first (admit now > admit by preempting > wait > reject), then
by a score in [0, 1], the weighted sum of:

* **data locality** (0.40): 1 when the cluster is in the region of the workload's data, 0 when
  reading it means cross-region egress, 0.5 when the data's region is unknown;
* **headroom** (0.25): the share of the cluster's GPUs of the model (CPU for a CPU gang) still
  free once the gang is placed — busy clusters rank lower;
* **within deserved** (0.20): 1 when the queue stays within its deserved share with the gang
  (nothing another queue can reclaim), else 0;
* **queue depth** (0.15): 1 / (1 + gangs already pending in the queue there).

Inside the chosen cluster the domain is :func:`gangway.scheduling.capacity.assign`'s (closest tier
that holds the whole gang, best fit); :attr:`Placement.topology` is what goes on the Volcano Job:
``networkTopology`` — ``hard`` at the tier the workload must stay within, else ``soft`` at the
tier of the domain that fits now, except on a gang that starts only by preempting gangs of its
own queue (Volcano's preempt action skips a Job with any ``networkTopology``) — and the model's
node selector for that cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangway.scheduling.admission import (
    ClusterDecision,
    Decision,
    Verdict,
    admit,
    in_cluster,
)
from gangway.scheduling.capacity import ClusterView, SnapshotView, view_of
from gangway.scheduling.snapshot.cluster_state import ClusterState, Snapshot
from gangway.scheduling.workload import Workload
from gangway.units import amount_said, quota_keys

__all__ = ["WEIGHTS", "Option", "Placement", "Topology", "place"]

WEIGHTS = {"locality": 0.40, "headroom": 0.25, "deserved": 0.20, "depth": 0.15}


@dataclass(frozen=True)
class Topology:
    """What the chosen placement writes onto the Volcano Job."""

    tier: int | None
    """``highestTierAllowed`` (1 = closest); None: no ``networkTopology``."""
    tier_name: str | None
    hard: bool
    gpu_product: str | None
    note: str | None = None
    """Why there is no ``networkTopology`` where one would be preferred."""


@dataclass(frozen=True)
class Option:
    cluster: str
    decision: ClusterDecision
    score: float
    factors: dict[str, float]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Placement:
    decision: Decision
    options: tuple[Option, ...]
    """Every cluster, best first."""
    topology: Topology | None
    """For the chosen (first) option, when it is not a rejection."""

    @property
    def chosen(self) -> Option | None:
        ok = [o for o in self.options if o.decision.verdict != Verdict.REJECT]
        return ok[0] if ok else None


def _headroom(w: Workload, view: ClusterView, placed_pods: int) -> float:
    i = 2 if w.per_pod.gpus else 0
    mask = view.ever_mask(w.per_pod, w.gpu_type)
    total = int(view.allocatable[mask, i].sum())
    if total <= 0:
        return 0.0
    need = (w.per_pod.gpus if i == 2 else w.per_pod.cpu) * placed_pods
    return max(0.0, (int(view.free[mask, i].sum()) - need) / total)


def _score(w: Workload, view: ClusterView, d: ClusterDecision) -> Option:
    state, queue = view.state, str(w.queue)
    notes = []
    if w.data_region is None:
        locality = 0.5
    elif w.data_region == state.region:
        locality = 1.0
        notes.append(f"data is in {state.region}")
    else:
        locality = 0.0
        notes.append(f"data in {w.data_region}, cluster in {state.region}: cross-region egress")
    q = state.queues.get(queue)
    beyond = [
        (k, share)
        for k in quota_keys(w.gpu_type, w.per_pod.gpus)
        if q is not None
        and (share := q.deserved.get(k)) is not None
        and view.used(queue, k) + w.total(k) > share
    ]
    within = not beyond
    for k, share in beyond[:1]:
        notes.append(
            f"beyond queue {queue}'s deserved {k} ({amount_said(k, share)}): other queues may "
            "reclaim what it holds over that"
        )
    me = view.gangs.get(f"{w.namespace}/{w.name}")
    itself = 1 if me is not None and me.phase == "Pending" and me.queue == queue else 0
    pending = view.pending.get(queue, 0) - itself
    if pending:
        notes.append(f"{pending} gang(s) already pending in {queue}")
    if d.verdict == Verdict.REJECT:
        notes = []  # its reason says it all
    factors = {
        "locality": locality,
        "headroom": _headroom(w, view, w.pods if d.assignment else 0),
        "deserved": 1.0 if within else 0.0,
        "depth": 1.0 / (1 + pending),
    }
    score = round(sum(WEIGHTS[k] * v for k, v in factors.items()), 4)
    return Option(view.name, d, score, factors, tuple(notes))


def place(
    workload: Workload, snapshot: Snapshot | SnapshotView, *, cluster: str | None = None
) -> Placement:
    """Rank every cluster (or only ``cluster``) for ``workload``; see the module docstring.
    Several decisions over one snapshot share its :class:`SnapshotView`."""
    fleet = view_of(snapshot)
    decision = admit(workload, fleet, cluster=cluster)
    if decision.problems:
        return Placement(decision, (), None)
    all_views = fleet.clusters
    w = decision.workload
    options = sorted(
        (
            _score(in_cluster(w, all_views[d.cluster]), all_views[d.cluster], d)
            for d in decision.clusters
        ),
        key=lambda o: (o.decision.verdict, -o.score, o.cluster),
    )
    best = options[0] if options and options[0].decision.verdict != Verdict.REJECT else None
    topology = None
    if best is not None:
        view = all_views[best.cluster]
        topology = _topology(in_cluster(w, view), best, view.state)
    return Placement(decision, tuple(options), topology)


NO_SOFT_TOPOLOGY = (
    "no networkTopology: the gang starts only by preempting gangs of its own queue, and "
    "Volcano's preempt action skips a Job that carries one (even soft)"
)


def _topology(w: Workload, best: Option, state: ClusterState) -> Topology:
    """What the chosen option writes on the Job (see the module docstring) — no soft
    ``networkTopology`` on a gang that starts only by preempting within its queue, which
    Volcano's preempt action would then skip."""
    d = best.decision
    a = d.assignment
    note = None
    if w.within:  # hard: never wider than asked (the chosen domain may be closer still)
        tier: int | None = state.tiers.index(w.within) + 1
    else:  # soft: prefer what fits now
        tier = state.tiers.index(a.tier) + 1 if a and a.tier else None
        plan = d.preemption
        preempts = plan is not None and any(v.rule.startswith("preempt") for v in plan.victims)
        if d.verdict == Verdict.PREEMPT and preempts and tier is not None:
            tier, note = None, NO_SOFT_TOPOLOGY
    product = state.gpu_products.get(w.gpu_type, w.gpu_type) if w.gpu_type else None
    name = state.tiers[tier - 1] if tier else None
    return Topology(
        tier=tier, tier_name=name, hard=w.within is not None, gpu_product=product, note=note
    )
