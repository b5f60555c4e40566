"""Every sample of the fleet metrics (:data:`~gangway.scheduling.fleet_metrics.FLEET_METRICS`)
from one snapshot: what ``gangway exporter`` serves. Pure — the same decisions ``gangway
queues``, ``why``, ``explain`` and ``submit --cluster auto`` make, over one
:class:`~gangway.scheduling.capacity.SnapshotView` built once for the whole snapshot.

* **Queues** (per cluster, queue and ``gpu_model``: ``any`` for the quota key ``gpu``, the
  model for ``gpu/MODEL``): what the running gangs hold — a parent queue counting its
  children's, as ``gangway queues`` does — and the guarantee, deserved share (raised to the
  guarantee, as Volcano's capacity plugin holds it) and capability, each where the queue sets
  one.
* **Pending gangs**, each classed by its admission decision (:func:`pending_reason`), and the
  age of each queue's oldest (from its PodGroup's ``created_at``).
* **Clusters** per GPU model: allocatable, allocated, free and *fragmented* — free GPUs on nodes
  where no pending gang's pod fits (short of CPU, memory or GPUs there); none for a model no
  pending gang may take.
* **Teams**: GPU-seconds their queue's running gangs held since the ``previous`` snapshot — a
  counter's increment, which the caller adds up.
* **Running gangs**: seconds since their last complete checkpoint, where lineage gave one.

:func:`exporter_families` is the exporter's own health, from what its loop counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np

from gangway.scheduling.admission import ClusterDecision, Verdict, WaitsFor, admit
from gangway.scheduling.capacity import ClusterView, SnapshotView, fit, view_of
from gangway.scheduling.fleet_metrics import ANY_MODEL, FLEET_METRICS, PENDING_REASONS, fleet_spec
from gangway.scheduling.snapshot.cluster_state import Gang, Snapshot
from gangway.scheduling.workload import Workload
from gangway.step.metrics import MetricSpec

__all__ = [
    "EXPORTER_METRICS",
    "FLEET_FAMILIES",
    "Family",
    "Sample",
    "exporter_families",
    "fleet_families",
    "pending_reason",
]

Sample = tuple[tuple[str, ...], float]
"""Label values (in the order of the metric's labels) and the value."""


class Family(NamedTuple):
    """One metric's samples. A counter's are increments since the previous snapshot."""

    spec: MetricSpec
    samples: tuple[Sample, ...]


EXPORTER_METRICS = tuple(m.name for m in FLEET_METRICS if m.name.startswith("gangway_exporter_"))
"""The exporter's own health (:func:`exporter_families`)."""
FLEET_FAMILIES = tuple(
    m.name for m in FLEET_METRICS if m.emitted_by == "exporter" and m.name not in EXPORTER_METRICS
)
"""What a snapshot tells (:func:`fleet_families`), in declaration order."""

_ROOT = "root"


def fleet_families(
    snapshot: Snapshot | SnapshotView,
    *,
    previous: datetime | None = None,
    clusters: Collection[str] | None = None,
) -> list[Family]:
    """Every fleet metric's samples over ``snapshot`` (only ``clusters``, when given); the
    team GPU-seconds counter gets what was held since ``previous`` (the last snapshot's time;
    None: nothing yet)."""
    fleet = view_of(snapshot)
    out: dict[str, list[Sample]] = {name: [] for name in FLEET_FAMILIES}
    for name, view in fleet.clusters.items():
        if clusters is not None and name not in clusters:
            continue
        _queues(view, out)
        _pending(fleet, view, out)
        _capacity(view, out)
        _team_seconds(fleet.snapshot, view, previous, out)
        _checkpoints(fleet.snapshot.taken_at, view, out)
    return [Family(fleet_spec(name), tuple(out[name])) for name in FLEET_FAMILIES]


def exporter_families(
    clusters: Sequence[str], *, errors: int, last_ok: float | None, duration: float | None
) -> list[Family]:
    """The exporter's health for each of ``clusters``: snapshots it could not read (a total,
    not an increment), the Unix time of the last it read and how long that took (absent
    before the first)."""
    values = {
        "gangway_exporter_last_snapshot_time_seconds": last_ok,
        "gangway_exporter_snapshot_errors_total": float(errors),
        "gangway_exporter_snapshot_duration_seconds": duration,
    }
    return [
        Family(
            fleet_spec(name),
            () if (v := values[name]) is None else tuple(((c,), v) for c in clusters),
        )
        for name in EXPORTER_METRICS
    ]


def _model(key: str) -> str:
    """The ``gpu_model`` label of GPU quota key ``key``."""
    return ANY_MODEL if key == "gpu" else key.removeprefix("gpu/")


def _queues(view: ClusterView, out: dict[str, list[Sample]]) -> None:
    for queue, q in view.state.queues.items():
        if queue == _ROOT:
            continue
        named = (*q.guarantee, *q.deserved, *q.capability, *view.usage.get(queue, {}))
        for key in sorted({"gpu", *(k for k in named if k.startswith("gpu"))}):
            labels = (view.name, queue, _model(key))
            out["gangway_queue_allocated_gpus"].append((labels, view.used(queue, key)))
            if key in q.guarantee:
                out["gangway_queue_guarantee_gpus"].append((labels, q.guarantee[key]))
            if key in q.deserved or key in q.guarantee:
                share = max(q.deserved.get(key, 0), q.guarantee.get(key, 0))
                out["gangway_queue_deserved_gpus"].append((labels, share))
            if key in q.capability:
                out["gangway_queue_capability_gpus"].append((labels, q.capability[key]))


_REASONS = {
    Verdict.ADMIT: "fits_now",
    Verdict.PREEMPT: "preemption",
    Verdict.REJECT: "never_fits",
}
_WAITS = {WaitsFor.QUOTA: "quota", WaitsFor.ROOM: "domain"}


def _reason(d: ClusterDecision | None) -> str:
    if d is None:
        return "never_fits"
    if d.verdict == Verdict.WAIT:
        return _WAITS[d.waits_for] if d.waits_for else "domain"
    return _REASONS[d.verdict]


def pending_reason(gang: Gang, fleet: SnapshotView, cluster: str) -> str:
    """Why pending ``gang`` of ``cluster`` waits, as its admission decision there says
    (:data:`~gangway.scheduling.fleet_metrics.PENDING_REASONS`): *wait* for its queue's
    capability → ``quota``; *wait* for free nodes in one domain → ``domain``; *preempt* →
    ``preemption``; *reject* → ``never_fits``; *admit* → ``fits_now`` (it starts at Volcano's
    next cycle — or Volcano sees a constraint the snapshot does not record).

    A gang whose GPU model is not known (a live pending gang's pods are on no node yet) may
    take any model: the best verdict over the cluster's models. A priority class the snapshot
    does not know is read as its default class."""
    view = fleet.clusters[cluster]
    models: list[str | None] = [gang.gpu_type]
    if gang.per_pod.gpus and gang.gpu_type is None:
        models = [*sorted(t for t in view.types if t)] or [None]
    classes = fleet.snapshot.priority_classes
    cls = gang.priority_class if not classes or gang.priority_class in classes else None
    best: ClusterDecision | None = None
    for model in models:
        w = Workload(
            name=gang.name,
            pods=gang.pods,
            per_pod=gang.per_pod,
            queue=gang.queue,
            priority_class=cls,
            gpu_type=model,
            namespace=gang.namespace,
        )
        d = admit(w, fleet, cluster=cluster)
        row = d.clusters[0] if d.clusters and not d.problems else None
        if row is not None and (best is None or row.verdict < best.verdict):
            best = row
    return _reason(best)


def _pending(fleet: SnapshotView, view: ClusterView, out: dict[str, list[Sample]]) -> None:
    state, taken = view.state, fleet.snapshot.taken_at
    counts: dict[tuple[str, str], int] = defaultdict(int)
    oldest: dict[str, float | None] = {}
    for g in state.gangs:
        if g.phase != "Pending":
            continue
        counts[(g.queue, pending_reason(g, fleet, view.name))] += 1
        age = None if g.created_at is None else max(0.0, (taken - g.created_at).total_seconds())
        before = oldest.get(g.queue)
        oldest[g.queue] = age if before is None else max(before, age or 0.0)
    for queue in state.queues:
        if queue == _ROOT:
            continue
        for reason in PENDING_REASONS:
            out["gangway_queue_pending_gangs"].append(
                ((view.name, queue, reason), counts[(queue, reason)])
            )
        if queue not in oldest or oldest[queue] is not None:
            age = oldest.get(queue) or 0.0
            out["gangway_queue_oldest_pending_seconds"].append(((view.name, queue), age))


def _capacity(view: ClusterView, out: dict[str, list[Sample]]) -> None:
    """Per GPU model: allocatable, allocated, free and fragmented GPUs — free ones on nodes
    where no pending gang that may take the model fits a pod (none when no such gang)."""
    nodes = view.state.nodes
    held = np.array([n.allocated.gpus for n in nodes], dtype=np.int64)
    free = view.free[:, 2]
    pending = [g for g in view.state.gangs if g.phase == "Pending" and g.per_pod.gpus]
    wanted = {g.gpu_type for g in pending}
    usable = np.zeros(len(nodes), dtype=bool)
    for per_pod, gpu_type in {(g.per_pod, g.gpu_type) for g in pending}:
        usable |= fit(view, per_pod, gpu_type) > 0
    for model, code in view.types.items():
        if model is None:
            continue
        mine = view.gpu_type == code
        stranded = int(free[mine & ~usable].sum()) if wanted & {model, None} else 0
        labels = (view.name, model)
        out["gangway_cluster_allocatable_gpus"].append(
            (labels, int(view.allocatable[mine, 2].sum()))
        )
        out["gangway_cluster_allocated_gpus"].append((labels, int(held[mine].sum())))
        out["gangway_cluster_free_gpus"].append((labels, int(free[mine].sum())))
        out["gangway_cluster_fragmented_gpus"].append((labels, stranded))


def _team_seconds(
    snap: Snapshot, view: ClusterView, previous: datetime | None, out: dict[str, list[Sample]]
) -> None:
    """GPU-seconds each team's queue held between ``previous`` and this snapshot: every
    running gang's GPUs × the span (from its start, when it started within it)."""
    taken = snap.taken_at
    span = 0.0 if previous is None else max(0.0, (taken - previous).total_seconds())
    held: dict[str, float] = defaultdict(float)
    if span:
        for g in view.state.gangs:
            if g.phase == "Running" and g.per_pod.gpus:
                ran = span
                if g.started_at is not None:
                    ran = min(span, max(0.0, (taken - g.started_at).total_seconds()))
                held[g.queue] += g.total("gpu") * ran
    for team, info in sorted(snap.teams.items()):
        if info.queue in view.state.queues:
            out["gangway_team_gpu_seconds_total"].append(((view.name, team), held[info.queue]))


def _checkpoints(taken: datetime, view: ClusterView, out: dict[str, list[Sample]]) -> None:
    """Seconds since each running gang's last checkpoint (its workflow's; a gang of no
    workflow by its own name); the newest where a workflow runs several gangs."""
    ages: dict[tuple[str, ...], float] = {}
    for g in view.state.gangs:
        if g.phase != "Running" or g.last_checkpoint_at is None:
            continue
        labels = (view.name, g.namespace, g.queue, g.workflow or g.name)
        age = max(0.0, (taken - g.last_checkpoint_at).total_seconds())
        ages[labels] = min(age, ages.get(labels, age))
    out["gangway_gang_last_checkpoint_age_seconds"].extend(sorted(ages.items()))
