"""The fleet as the decisions see it, as Prometheus metrics: what the platform exporter
(``gangway exporter``) publishes from the same snapshots admission, preemption and placement
read.

This module declares the metrics (:data:`FLEET_METRICS`: name, type, labels, meaning — the
table in ``docs/observability.md``, the names alerts and dashboards use). Labels are bounded:
``cluster``, ``queue``, ``team``, ``gpu_model`` (``any`` for the all-models quota key ``gpu``),
``reason`` (a pending class of :data:`PENDING_REASONS`), and for a running gang ``namespace``
and ``workflow``.
"""

from __future__ import annotations

from gangway.step.metrics import MetricSpec

__all__ = ["ANY_MODEL", "FLEET_METRICS", "PENDING_REASONS", "fleet_spec"]

ANY_MODEL = "any"
"""The ``gpu_model`` of the quota key ``gpu`` (every model together)."""

PENDING_REASONS = ("quota", "domain", "preemption", "never_fits", "fits_now")
"""Why a pending gang waits, as ``gangway why`` classes it: for its queue's quota, for enough
free nodes inside one topology domain, for a preemption that would make room, or never (no
node shape or cluster could hold it) — or for nothing Gangway sees (``fits_now``: it starts at
Volcano's next cycle, or waits on something the snapshot does not record, such as its Job's
``networkTopology``)."""

_QUEUE = ("cluster", "queue", "gpu_model")
_CLUSTER = ("cluster", "gpu_model")

FLEET_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "gangway_queue_allocated_gpus",
        "gauge",
        _QUEUE,
        "GPUs the queue's running gangs hold",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_guarantee_gpus",
        "gauge",
        _QUEUE,
        "GPUs guaranteed to the queue (never reclaimed); absent when it has none",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_deserved_gpus",
        "gauge",
        _QUEUE,
        "the queue's deserved share: above it, what it holds may be reclaimed",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_capability_gpus",
        "gauge",
        _QUEUE,
        "the most GPUs the queue may hold; absent when unlimited",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_pending_gangs",
        "gauge",
        ("cluster", "queue", "reason"),
        "pending gangs by why they wait (reason: quota, domain, preemption, never_fits, fits_now)",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_oldest_pending_seconds",
        "gauge",
        ("cluster", "queue"),
        "age of the queue's oldest pending gang (since its PodGroup was created)",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_allocatable_gpus",
        "gauge",
        _CLUSTER,
        "GPUs of schedulable nodes",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_allocated_gpus",
        "gauge",
        _CLUSTER,
        "GPUs held by pods",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_free_gpus",
        "gauge",
        _CLUSTER,
        "GPUs free on schedulable nodes",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_fragmented_gpus",
        "gauge",
        _CLUSTER,
        "free GPUs that no pending gang's pod shape fits (short of CPU, memory or GPUs on "
        "their node); with no gang pending for the model, none",
        "exporter",
    ),
    MetricSpec(
        "gangway_team_gpu_seconds_total",
        "counter",
        ("cluster", "team"),
        "GPU-seconds the team's running gangs held, counted between snapshots",
        "exporter",
    ),
    MetricSpec(
        "gangway_gang_last_checkpoint_age_seconds",
        "gauge",
        ("cluster", "namespace", "queue", "workflow"),
        "seconds since a running gang's last complete checkpoint (from lineage)",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_last_snapshot_time_seconds",
        "gauge",
        ("cluster",),
        "Unix time of the last snapshot read without error",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_snapshot_errors_total",
        "counter",
        ("cluster",),
        "snapshots that could not be read (the error is logged; the exporter keeps going)",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_snapshot_duration_seconds",
        "gauge",
        ("cluster",),
        "seconds the last snapshot took to read and decide over",
        "exporter",
    ),
    MetricSpec(
        "gangway_lineage_spool_pending_records",
        "gauge",
        ("namespace",),
        "lineage records spooled but not yet in MLflow",
        "`gangway lineage sync --follow`",
    ),
)


def fleet_spec(name: str) -> MetricSpec:
    """The declared fleet metric ``name``; a KeyError names the known ones."""
    for m in FLEET_METRICS:
        if m.name == name:
            return m
    known = ", ".join(m.name for m in FLEET_METRICS)
    raise KeyError(f"no fleet metric {name!r}; declared: {known}")
