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
        "GPUs the queue's running gangs hold (a parent queue counts its children's, as gangway "
        'queues does); every queue has gpu_model="any"',
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_guarantee_gpus",
        "gauge",
        _QUEUE,
        "GPUs guaranteed to the queue (never reclaimed), the same on every cluster whatever the "
        "cluster holds; absent when it has none",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_deserved_gpus",
        "gauge",
        _QUEUE,
        "the deserved share (above it, what the queue holds may be reclaimed), raised to the "
        "guarantee as Volcano's capacity plugin holds it; absent when neither is set",
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
        "pending gangs by why they wait (reason: quota, domain, preemption, never_fits, "
        "fits_now); every queue x every reason, 0 included",
        "exporter",
    ),
    MetricSpec(
        "gangway_queue_oldest_pending_seconds",
        "gauge",
        ("cluster", "queue"),
        "age of the queue's oldest pending gang (since its PodGroup was created); 0 with none "
        "pending; absent when none of its pending gangs has a creation time",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_allocatable_gpus",
        "gauge",
        _CLUSTER,
        "GPUs of schedulable nodes, per model",
        "exporter",
    ),
    MetricSpec(
        "gangway_cluster_allocated_gpus",
        "gauge",
        _CLUSTER,
        "GPUs requested by pods on the model's nodes (cordoned ones too)",
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
        "free GPUs on nodes where no pending gang's pod fits (short of CPU, memory or GPUs "
        "there); 0 when no pending gang may take the model",
        "exporter",
    ),
    MetricSpec(
        "gangway_team_gpu_seconds_total",
        "counter",
        ("cluster", "team"),
        "GPU-seconds the team's queue's running gangs held, between one snapshot and the next "
        "(a gang that started in between, from its start)",
        "exporter",
    ),
    MetricSpec(
        "gangway_gang_last_checkpoint_age_seconds",
        "gauge",
        ("cluster", "namespace", "queue", "workflow"),
        "seconds since a running gang's last complete checkpoint (from lineage; the gang's name "
        "where it belongs to no workflow)",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_last_snapshot_time_seconds",
        "gauge",
        ("cluster",),
        "Unix time the last snapshot was read without error (the exporter's clock, not the "
        "snapshot's taken_at); absent until one was",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_snapshot_errors_total",
        "counter",
        ("cluster",),
        "snapshots that could not be read (each logged on one line; the exporter keeps going); "
        "0 from the start",
        "exporter",
    ),
    MetricSpec(
        "gangway_exporter_snapshot_duration_seconds",
        "gauge",
        ("cluster",),
        "seconds the last good snapshot took to read and decide over; absent until one was read",
        "exporter",
    ),
    MetricSpec(
        "gangway_lineage_spool_pending_records",
        "gauge",
        ("namespace",),
        "lineage records spooled but not yet in MLflow, as of the follower's last pass that read "
        "its spool root (kept, not zeroed, while passes fail); absent until one did",
        "`gangway lineage sync --follow`",
    ),
    MetricSpec(
        "gangway_lineage_sync_errors_total",
        "counter",
        ("namespace",),
        "passes of the lineage follower that reported an error: its spool root could not be "
        "listed or does not exist, or a spool could not be sent; 0 from the start",
        "`gangway lineage sync --follow`",
    ),
    MetricSpec(
        "gangway_lineage_sync_last_pass_time_seconds",
        "gauge",
        ("namespace",),
        "Unix time of the follower's last pass that read its spool root (listed it, whatever "
        "it then sent); absent until one did",
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
