"""Where a pipeline's gangs go: the region its data is in, a placement for each gang step, and
for ``submit --cluster auto`` the one cluster that serves all of them.

Pure over a snapshot and the platform config's regions: what ``gangway explain`` shows and
``gangway submit --cluster auto`` acts on is decided here, the CLI only renders it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gangway.errors import PermanentError, closest
from gangway.scheduling.admission import Verdict
from gangway.scheduling.capacity import view_of
from gangway.scheduling.placement import Placement, place
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.scheduling.workload import gang_workloads, place_gangs, region_of

__all__ = [
    "ClusterChoice",
    "choose_cluster",
    "common_cluster",
    "data_region",
    "not_in_snapshot",
    "place_pipeline",
    "placed_manifest",
]


def data_region(
    given: str | None, values: Iterable[str], regions: Collection[str], buckets: Mapping[str, str]
) -> str | None:
    """The region of the pipeline's input data: ``given`` (``--data-region``, one of
    ``regions``), else the region whose bucket (``buckets``: region → ``s3://bucket``) holds
    the first of the parameter ``values`` that is in one; None when none is."""
    if given is not None and given not in regions:
        near = closest(given, regions, cutoff=0.5)
        hint = f"; did you mean {near!r}?" if near else ""
        raise PermanentError(
            f"--data-region {given}: not a region ({', '.join(sorted(regions))}){hint}"
        )
    return given or region_of(values, buckets)


def place_pipeline(
    manifest: Mapping[str, Any],
    values: Mapping[str, str],
    snapshot: Snapshot,
    *,
    region: str | None,
    product_models: Mapping[str, str],
    gpu_type: str | None = None,
    within: str | None = None,
    cluster: str | None = None,
    where: str = "the pipeline",
) -> list[Placement]:
    """A placement for each gang step of ``manifest`` with the parameter ``values``, over
    ``snapshot`` (only ``cluster`` when given); ``gpu_type`` and ``within`` override every
    gang's own. ``product_models`` reads a Job's GPU product back as the config's model."""
    gangs = gang_workloads(manifest, values, data_region=region, product_models=product_models)
    if not gangs:
        raise PermanentError(f"{where}: no gang step (Volcano Job) to place")
    if cluster is not None and cluster not in snapshot.clusters:
        raise not_in_snapshot(cluster, snapshot)
    fleet = view_of(snapshot)
    return [
        place(
            replace(w, gpu_type=gpu_type or w.gpu_type, within=within or w.within),
            fleet,
            cluster=cluster,
        )
        for w in gangs
    ]


def not_in_snapshot(name: str, snapshot: Snapshot) -> PermanentError:
    """The error for ``--cluster NAME`` that the snapshot does not hold, with a near name."""
    known = sorted(snapshot.clusters)
    near = closest(name, known)
    hint = f"; did you mean {near!r}?" if near else ""
    return PermanentError(f"--cluster {name}: not in the snapshot ({', '.join(known)}){hint}")


def common_cluster(placements: list[Placement], known: Collection[str]) -> str:
    """The first gang's best cluster among ``known`` (those ``submit`` can send to) where no
    gang of the pipeline is rejected: a pipeline runs on one cluster, so every gang must be
    able to run there, and the first gang's ranking orders what is left."""
    able = set(known)
    for p in placements:
        able &= {o.cluster for o in p.options if o.decision.verdict != Verdict.REJECT}
    first = [o.cluster for o in placements[0].options if o.cluster in able] if placements else []
    if not first:
        which = "this" if len(placements) == 1 else "every gang of this pipeline"
        raise PermanentError(f"--cluster auto: no cluster can ever run {which}; nothing was sent")
    return first[0]


@dataclass(frozen=True)
class ClusterChoice:
    """``--cluster auto``'s answer: the cluster, and each gang's placement there."""

    cluster: str
    placements: list[Placement]
    replaced: bool
    """Whether some gang's own best cluster was another one, so every gang was placed again
    on the chosen cluster."""


def choose_cluster(
    placements: list[Placement], snapshot: Snapshot, known: Collection[str]
) -> ClusterChoice:
    """The cluster for the whole pipeline (:func:`common_cluster`), each gang placed there."""
    cluster = common_cluster(placements, known)
    if all(p.chosen is not None and p.chosen.cluster == cluster for p in placements):
        return ClusterChoice(cluster, placements, replaced=False)
    fleet = view_of(snapshot)
    there = [place(p.decision.workload, fleet, cluster=cluster) for p in placements]
    return ClusterChoice(cluster, there, replaced=True)


def placed_manifest(manifest: Mapping[str, Any], placements: list[Placement]) -> dict[str, Any]:
    """``manifest`` with each gang's chosen topology written on its Volcano Job."""
    tops = {p.decision.workload.name: p.topology for p in placements if p.topology}
    return place_gangs(manifest, tops)
