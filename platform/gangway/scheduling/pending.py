"""Why a workflow's gang is pending: what Volcano says (its PodGroup's conditions — which never
reach the Job, let alone Argo) next to Gangway's own decision over a fresh snapshot of the
cluster, so one screen answers "waiting for what, and for how long might that be".

Pure: it reads the workflow's Volcano Jobs and PodGroups as the API returns them (the CLI lists
them; tests give recorded ones) and a :class:`~gangway.scheduling.snapshot.cluster_state.Snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gangway.contract import STEP_LABEL, WORKFLOW_LABEL
from gangway.scheduling.capacity import view_of
from gangway.scheduling.placement import Placement, place
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.scheduling.workload import workload_of_job
from gangway.volcano.gang import is_job
from gangway.volcano.objects import PODGROUP_KIND, Condition, read_podgroup

__all__ = ["GangWhy", "why_pending"]


@dataclass(frozen=True)
class GangWhy:
    job: str
    step: str | None
    phase: str
    """The PodGroup's phase (Pending, Inqueue, Running, …); ``no PodGroup`` before Volcano
    made one."""
    conditions: tuple[Condition, ...]
    placement: Placement | None
    """Gangway's decision for a gang not yet running; None for one that runs."""


def why_pending(
    workflow: str, objects: Iterable[Mapping[str, Any]], snapshot: Snapshot, *, cluster: str
) -> list[GangWhy]:
    """Each Volcano Job of ``workflow`` in ``objects`` (with the PodGroups), what Volcano
    says of it and — unless it runs — Gangway's decision for it in ``cluster``."""
    objs = list(objects)
    groups = [read_podgroup(o) for o in objs if o.get("kind") == PODGROUP_KIND]
    fleet = view_of(snapshot)  # one view for every gang's decision
    state = snapshot.clusters.get(cluster)
    out = []
    for job in objs:
        meta = job.get("metadata") or {}
        labels = meta.get("labels") or {}
        if not is_job(job) or labels.get(WORKFLOW_LABEL) != workflow:
            continue
        name = str(meta.get("name"))
        group = next((g for g in groups if g.owner == name), None)
        phase = group.phase if group else "no PodGroup"
        decision = None
        if phase != "Running" and state is not None:
            w = workload_of_job(
                job,
                name=group.name if group else name,  # as the snapshot knows the gang
                team=None,
                product_models={p: m for m, p in state.gpu_products.items()},
                tiers=state.tiers,
            )
            decision = place(w, fleet, cluster=cluster)
        out.append(
            GangWhy(
                job=name,
                step=(group.labels.get(STEP_LABEL) if group else None) or labels.get(STEP_LABEL),
                phase=phase,
                conditions=group.conditions if group else (),
                placement=decision,
            )
        )
    return out
