"""Grafana dashboards of the fleet, of a team and of one workflow, built with Grafana's typed
builders (``grafana-foundation-sdk``) from the platform config, and shipped as ConfigMaps the
Grafana sidecar loads (label ``grafana_dashboard: "1"``, kube-prometheus-stack's default).

Three dashboards, each with a ``datasource`` variable (a Prometheus) and a ``cluster`` variable
(the config's clusters that have a ``prometheus_url``):

* **Fleet** (:data:`FLEET_UID`, variable ``gpu_model`` too): per cluster and GPU model, what
  queues hold against their guarantee, deserved share and capability, pending gangs by why they
  wait, free GPUs against fragmented ones, and GPU-hours by team — the platform exporter's
  ``cluster``-labelled series (:mod:`gangway.scheduling.fleet_metrics`).
* **Team** (:data:`TEAM_UID`, variables ``team`` and ``queue``): the team's runs' device-hours,
  its queue against its quota, its pending gangs, its running trainings' progress and ETA.
* **Workflow** (:data:`WORKFLOW_UID`, variable ``workflow``): the page the Argo UI's "Metrics
  dashboard" link opens (a cluster's ``dashboard_url``, :func:`workflow_dashboard_url`):
  progress, tokens/s, MFU, loss, step time, ETA, checkpoint age and save time, resumes and
  attempts, items/s of evaluation and inference, devices held and their GPU utilisation.

Step series carry no ``cluster`` label (each cluster's Prometheus scrapes its own pods), so step
queries select by team or workflow; the exporter's series are selected by cluster. A dashboard
is the same whichever overlay ships it, so a Grafana that loads several clusters' ConfigMaps
sees one dashboard per uid. Metric names are those of :data:`gangway.step.metrics.METRICS`,
:data:`gangway.scheduling.fleet_metrics.FLEET_METRICS` (spelled here, as the renderers sit
below the deciding layer; a test holds every name to a declaration), Argo's step metrics
(:mod:`gangway.workflows.metrics`) and DCGM exporter's GPU utilisation.
"""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import dashboard as board
from grafana_foundation_sdk.models import dashboard as model

from gangway.config import PlatformConfig
from gangway.render.grafana import (
    Query,
    bars,
    configmap,
    custom_variable,
    frame,
    laid_out,
    query_variable,
    series,
    stat_panel,
)
from gangway.workflows.metrics import ARGO_PREFIX

__all__ = [
    "FLEET_UID",
    "TEAM_UID",
    "WORKFLOW_UID",
    "dashboard_configmaps",
    "dashboards",
    "fleet",
    "team",
    "workflow",
    "workflow_dashboard_url",
]

FLEET_UID = "gangway-fleet"
TEAM_UID = "gangway-team"
WORKFLOW_UID = "gangway-run"
"""The workflow dashboard's uid: the ``/d/gangway-run`` of a cluster's ``dashboard_url``."""


def _clusters(cfg: PlatformConfig) -> list[str]:
    return [n for n, c in cfg.clusters.items() if c.prometheus_url] or list(cfg.clusters)


# ---- the fleet -------------------------------------------------------------------------------

_QUEUE = '{cluster=~"$cluster", gpu_model=~"$gpu_model"}'
_BY_QUEUE = "sum by (cluster, queue, gpu_model)"
_BY_MODEL = "sum by (cluster, gpu_model)"
_QLEGEND = "{{cluster}} {{queue}} {{gpu_model}}"
_MLEGEND = "{{cluster}} {{gpu_model}}"


def _quota(selector: str, by: str, legend: str) -> list[Query]:
    """A queue's allocated GPUs and its guarantee, deserved share and capability."""
    return [
        (f"{by} (gangway_queue_{what}_gpus{selector})", f"{legend} {what}")
        for what in ("allocated", "guarantee", "deserved", "capability")
    ]


def _fleet_queues() -> list[Any]:
    return [
        board.Row("Queues: GPUs held against quota"),
        series(
            "GPUs allocated against quota",
            "short",
            "Each queue's GPUs held by running gangs, beside its guarantee (never reclaimed), "
            "deserved share (above it, reclaimable) and capability (its ceiling).",
            *_quota(_QUEUE, _BY_QUEUE, _QLEGEND),
        ),
        bars(
            "Allocated ÷ deserved, now",
            "percentunit",
            "Over 100 %: the queue borrows, and what it holds above its share may be reclaimed.",
            (
                f"{_BY_QUEUE} (gangway_queue_allocated_gpus{_QUEUE})"
                f" / {_BY_QUEUE} (gangway_queue_deserved_gpus{_QUEUE})",
                _QLEGEND,
            ),
        ),
        board.Row("Pending gangs"),
        series(
            "Pending gangs by reason",
            "short",
            "Why gangs wait, as `gangway why` classes it: quota, domain (no topology domain "
            "with room), preemption (would fit after evictions), never_fits, and the rest.",
            ('sum by (reason) (gangway_queue_pending_gangs{cluster=~"$cluster"})', "{{reason}}"),
            w=8,
            stacked=True,
        ),
        series(
            "Pending gangs by queue",
            "short",
            "Gangs waiting in each queue, whatever the reason.",
            (
                'sum by (cluster, queue) (gangway_queue_pending_gangs{cluster=~"$cluster"})',
                "{{cluster}} {{queue}}",
            ),
            w=8,
        ),
        series(
            "Oldest pending gang",
            "dtdurations",
            "Age of each queue's oldest pending gang (since its PodGroup was created).",
            (
                "max by (cluster, queue) "
                '(gangway_queue_oldest_pending_seconds{cluster=~"$cluster"})',
                "{{cluster}} {{queue}}",
            ),
            w=8,
        ),
    ]


def _fleet_capacity() -> list[Any]:
    gpus = [
        (f"{_BY_MODEL} (gangway_cluster_{what}_gpus{_QUEUE})", f"{_MLEGEND} {what}")
        for what in ("allocatable", "allocated", "free", "fragmented")
    ]
    return [
        board.Row("Capacity and fragmentation"),
        series(
            "GPUs: allocatable, allocated, free, fragmented",
            "short",
            "Fragmented: free GPUs no pending gang's pod shape fits on their node (short of "
            "CPU, memory or GPUs there); with no gang pending, none.",
            *gpus,
        ),
        series(
            "Fragmented share of free GPUs",
            "percentunit",
            "Free GPUs that cannot be used by what waits, as a share of the free ones.",
            (
                f"{_BY_MODEL} (gangway_cluster_fragmented_gpus{_QUEUE})"
                f" / {_BY_MODEL} (gangway_cluster_free_gpus{_QUEUE})",
                _MLEGEND,
            ),
            w=6,
        ),
        series(
            "Allocated share of allocatable GPUs",
            "percentunit",
            "GPUs held by pods over GPUs of schedulable nodes.",
            (
                f"{_BY_MODEL} (gangway_cluster_allocated_gpus{_QUEUE})"
                f" / {_BY_MODEL} (gangway_cluster_allocatable_gpus{_QUEUE})",
                _MLEGEND,
            ),
            w=6,
        ),
    ]


def _fleet_usage() -> list[Any]:
    team = 'gangway_team_gpu_seconds_total{cluster=~"$cluster"}'
    return [
        board.Row("GPU-hours by team"),
        bars(
            "GPU-hours by team over the time range",
            "h",
            "GPU-seconds the team's running gangs held, counted by the exporter between "
            "snapshots, ÷ 3600.",
            (f"sum by (team) (increase({team}[$__range])) / 3600", "{{team}}"),
            w=8,
        ),
        series(
            "GPUs held by team",
            "short",
            "GPU-seconds per second: the GPUs each team's gangs held.",
            (f"sum by (team) (rate({team}[$__rate_interval]))", "{{team}}"),
            w=8,
            stacked=True,
        ),
        bars(
            "GPU-hours by team, from the steps",
            "h",
            'The steps\' own count (`gangway_device_seconds_total{device="gpu"}`) from this '
            "Prometheus, whichever cluster ran them; `gangway usage` counts the same exactly.",
            (
                "sum by (team) (increase(gangway_device_seconds_total"
                '{device="gpu"}[$__range])) / 3600',
                "{{team}}",
            ),
            w=8,
        ),
        stat_panel(
            "Exporter's last snapshot",
            "dtdurations",
            "Seconds since the exporter last read the cluster without error.",
            (
                "time() - max by (cluster) "
                '(gangway_exporter_last_snapshot_time_seconds{cluster=~"$cluster"})',
                "{{cluster}}",
            ),
            w=24,
        ),
    ]


def _gpu_models(cfg: PlatformConfig) -> list[str]:
    return [*sorted({m for c in cfg.clusters.values() for m in c.gpus}), "any"]


def fleet(cfg: PlatformConfig) -> model.Dashboard:
    """The fleet: queues against quota, pending gangs, fragmentation, GPU-hours by team."""
    d = frame(FLEET_UID, "Gangway / Fleet", "Queues, pending gangs and GPUs of the fleet.")
    d = d.with_variable(custom_variable("cluster", _clusters(cfg), multi=True))
    d = d.with_variable(custom_variable("gpu_model", _gpu_models(cfg), multi=True))
    return laid_out(d, [*_fleet_queues(), *_fleet_capacity(), *_fleet_usage()])


# ---- a team ----------------------------------------------------------------------------------

_TEAM = '{team="$team"}'


def _running(metric: str, selector: str) -> str:
    """``metric`` by workflow and step, for the steps still running (their latest attempt has
    started and not ended: the end gauge is older than the start, or not written yet)."""
    by = "max by (workflow, step)"
    return (
        f"({by} ({metric}{selector}) unless on (workflow, step) "
        f"({by} (gangway_step_end_time_seconds{selector}) "
        f">= on (workflow, step) {by} (gangway_step_start_time_seconds{selector})))"
    )


def _team_runs() -> list[Any]:
    progress = (
        f"{_running('gangway_train_step', _TEAM)} / on (workflow, step) "
        f"max by (workflow, step) (gangway_train_target_steps{_TEAM})"
    )
    return [
        board.Row("Runs"),
        bars(
            "Device-hours by run over the time range",
            "h",
            "Devices × hours each run's steps held: GPUs (device=gpu) or, without GPUs, "
            "processes (device=cpu).",
            (
                f"sum by (workflow, device) (increase(gangway_device_seconds_total{_TEAM}"
                "[$__range])) / 3600",
                "{{workflow}} {{device}}",
            ),
            w=8,
        ),
        bars(
            "Running trainings: progress",
            "percentunit",
            "Optimizer steps done ÷ the target, of the training steps still running.",
            (progress, "{{workflow}} {{step}}"),
            w=8,
        ),
        bars(
            "Running trainings: ETA",
            "dtdurations",
            "Time left to the target step at the last log window's rate, checkpoints included.",
            (_running("gangway_train_eta_seconds", _TEAM), "{{workflow}} {{step}}"),
            w=8,
        ),
        series(
            "GPUs held by run",
            "short",
            "GPU-seconds per second of each run's steps: the GPUs it held.",
            (
                "sum by (workflow) (rate(gangway_device_seconds_total"
                '{team="$team", device="gpu"}[$__rate_interval]))',
                "{{workflow}}",
            ),
            stacked=True,
        ),
        series(
            "Tokens per second by run",
            "short",
            "The whole gang's tokens per second over its last log window.",
            (f"max by (workflow) (gangway_train_tokens_per_second{_TEAM})", "{{workflow}}"),
        ),
    ]


def _team_queue() -> list[Any]:
    queue = '{cluster=~"$cluster", queue=~"$queue"}'
    return [
        board.Row("The team's queue"),
        series(
            "Queue GPUs against quota",
            "short",
            "The queue's GPUs held by running gangs, beside its guarantee, deserved share and "
            "capability, by GPU model (`any`: every model together).",
            *_quota(queue, "sum by (queue, gpu_model)", "{{queue}} {{gpu_model}}"),
        ),
        series(
            "Pending gangs by reason",
            "short",
            "The queue's gangs waiting, by why (as `gangway why` classes it).",
            (f"sum by (reason) (gangway_queue_pending_gangs{queue})", "{{reason}}"),
            w=6,
            stacked=True,
        ),
        series(
            "Steps ended, by status (Argo)",
            "short",
            "Argo's count of the team's steps that ended, by step and status (Argo counts an "
            "attempt and its retried step each).",
            (
                f"sum by (step, status) (increase({ARGO_PREFIX}gangway_step_results_total"
                f"{_TEAM}[$__rate_interval]))",
                "{{step}} {{status}}",
            ),
            w=6,
            stacked=True,
        ),
    ]


def team(cfg: PlatformConfig) -> model.Dashboard:
    """A team: its runs' device-hours and progress, its queue against its quota, pending."""
    d = frame(TEAM_UID, "Gangway / Team", "A team's runs, queue and pending gangs.")
    d = d.with_variable(custom_variable("cluster", _clusters(cfg), multi=False))
    d = d.with_variable(custom_variable("team", list(cfg.team_views()), multi=False))
    queues = query_variable(
        "queue", 'label_values(gangway_step_start_time_seconds{team="$team"}, queue)'
    )
    d = d.with_variable(queues.multi(True).include_all(True).label("queue"))
    return laid_out(d, [*_team_runs(), *_team_queue()])


# ---- a workflow ------------------------------------------------------------------------------

_WF = '{workflow="$workflow"}'
_BY_STEP = "max by (step)"


def _workflow_now() -> list[Any]:
    return [
        board.Row("Now"),
        stat_panel(
            "Progress",
            "percentunit",
            "Optimizer steps done ÷ the target.",
            (
                f"{_BY_STEP} (gangway_train_step{_WF}) / on (step) "
                f"{_BY_STEP} (gangway_train_target_steps{_WF})",
                "{{step}}",
            ),
        ),
        stat_panel(
            "ETA",
            "dtdurations",
            "Time left to the target step at the last log window's rate, checkpoints included.",
            (f"{_BY_STEP} (gangway_train_eta_seconds{_WF})", "{{step}}"),
        ),
        stat_panel(
            "Last checkpoint",
            "dtdurations",
            "Time since the newest complete checkpoint was committed.",
            (
                f"time() - {_BY_STEP} (gangway_checkpoint_last_complete_time_seconds{_WF})",
                "{{step}}",
            ),
        ),
        stat_panel(
            "Resumes",
            "short",
            "Times training started again from a checkpoint (a preemption, a kill, a retry).",
            (
                f"sum by (step) (max_over_time(gangway_train_resumes_total{_WF}[$__range]))",
                "{{step}}",
            ),
        ),
        stat_panel(
            "Attempts",
            "short",
            "Attempts of each step: the first, retries and gang restarts.",
            (
                f"sum by (step) (max_over_time(gangway_step_attempts_total{_WF}[$__range]))",
                "{{step}}",
            ),
        ),
        stat_panel(
            "Device-hours",
            "h",
            "Devices × hours the run's steps held, by device (gpu or cpu).",
            (
                f"sum by (device) (max_over_time(gangway_device_seconds_total{_WF}[$__range])) "
                "/ 3600",
                "{{device}}",
            ),
        ),
    ]


def _workflow_training() -> list[Any]:
    return [
        board.Row("Training"),
        series(
            "Optimizer steps",
            "short",
            "Steps done by the slowest and fastest rank, and the target.",
            (f"min by (step) (gangway_train_step{_WF})", "{{step}} slowest rank"),
            (f"{_BY_STEP} (gangway_train_step{_WF})", "{{step}} fastest rank"),
            (f"{_BY_STEP} (gangway_train_target_steps{_WF})", "{{step}} target"),
            w=8,
        ),
        series(
            "Tokens per second",
            "short",
            "The whole gang's tokens per second over the last log window (checkpoints left out).",
            (f"{_BY_STEP} (gangway_train_tokens_per_second{_WF})", "{{step}}"),
            w=8,
        ),
        series(
            "MFU",
            "percentunit",
            "Model FLOPs utilisation over the last log window (GPUs only).",
            (f"{_BY_STEP} (gangway_train_mfu_ratio{_WF})", "{{step}}"),
            w=8,
        ),
        series(
            "Loss",
            "none",
            "Training loss, the mean over ranks of the last log window.",
            (f"{_BY_STEP} (gangway_train_loss{_WF})", "{{step}}"),
            w=8,
        ),
        series(
            "Step time",
            "s",
            "Seconds per optimizer step over the last log window, and the p90 of the windows' "
            "means over the rate interval.",
            (f"{_BY_STEP} (gangway_train_step_seconds{_WF})", "{{step}} last window"),
            (
                "histogram_quantile(0.9, sum by (step, le) (rate("
                f"gangway_train_step_duration_seconds_bucket{_WF}[$__rate_interval])))",
                "{{step}} p90",
            ),
            w=8,
        ),
        series(
            "ETA",
            "dtdurations",
            "Time left to the target step, as the training rank computes it at each log window.",
            (f"{_BY_STEP} (gangway_train_eta_seconds{_WF})", "{{step}}"),
            w=8,
        ),
    ]


def _workflow_checkpoints() -> list[Any]:
    save = "gangway_checkpoint_save_duration_seconds"
    return [
        board.Row("Checkpoints and restarts"),
        series(
            "Checkpoint age",
            "dtdurations",
            "Time since the newest complete checkpoint: what a preemption now would lose.",
            (
                f"time() - {_BY_STEP} (gangway_checkpoint_last_complete_time_seconds{_WF})",
                "{{step}}",
            ),
            w=8,
        ),
        series(
            "Checkpoint save time",
            "s",
            "Mean seconds to save and commit a checkpoint, over each live attempt's saves.",
            (f"sum by (step) ({save}_sum{_WF}) / sum by (step) ({save}_count{_WF})", "{{step}}"),
            w=8,
        ),
        series(
            "Resumes and attempts",
            "short",
            "Resumes from a checkpoint and attempts started, per step.",
            (f"sum by (step) (gangway_train_resumes_total{_WF})", "{{step}} resumes"),
            (f"sum by (step) (gangway_step_attempts_total{_WF})", "{{step}} attempts"),
            w=8,
        ),
    ]


def _workflow_items() -> list[Any]:
    return [
        board.Row("Evaluation, inference and devices"),
        series(
            "Items per second",
            "short",
            "Checkpoints scored (evaluation) or documents through a pass (inference) per "
            "second, since each attempt started its items, summed over fanned-out pods.",
            (f"sum by (step) (gangway_items_per_second{_WF})", "{{step}}"),
            w=6,
        ),
        series(
            "Items done ÷ planned",
            "percentunit",
            "Items done over the items the step's attempts set out to do.",
            (
                f"sum by (step) (gangway_items_processed_total{_WF}) / on (step) "
                f"sum by (step) (gangway_items_planned_total{_WF})",
                "{{step}}",
            ),
            w=6,
        ),
        series(
            "Devices held",
            "short",
            "Device-seconds per second of each step: the GPUs (or processes) it held.",
            (
                "sum by (step, device) (rate(gangway_device_seconds_total"
                f"{_WF}[$__rate_interval]))",
                "{{step}} {{device}}",
            ),
            w=6,
        ),
        series(
            "GPU utilisation (DCGM)",
            "percentunit",
            "DCGM exporter's GPU utilisation of the run's pods (the share of time a kernel "
            "ran, not MFU); empty where DCGM exporter is not scraped.",
            (
                "avg by (step) (DCGM_FI_DEV_GPU_UTIL * on (namespace, pod) group_left (step) "
                f"group by (namespace, pod, step) (gangway_step_start_time_seconds{_WF})) / 100",
                "{{step}}",
            ),
            w=6,
        ),
    ]


def workflow(cfg: PlatformConfig) -> model.Dashboard:
    """One workflow: training progress and speed, checkpoints, restarts, items, devices."""
    d = frame(WORKFLOW_UID, "Gangway / Workflow", "One workflow's steps, as they run.")
    d = d.with_variable(custom_variable("cluster", _clusters(cfg), multi=False))
    d = d.with_variable(
        query_variable("workflow", "label_values(gangway_step_start_time_seconds, workflow)")
    )
    parts = [*_workflow_now(), *_workflow_training(), *_workflow_checkpoints()]
    return laid_out(d, [*parts, *_workflow_items()])


# ---- what is rendered ------------------------------------------------------------------------


def dashboards(cfg: PlatformConfig) -> dict[str, model.Dashboard]:
    """Every dashboard, by uid."""
    return {FLEET_UID: fleet(cfg), TEAM_UID: team(cfg), WORKFLOW_UID: workflow(cfg)}


def dashboard_configmaps(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """The dashboards as ConfigMaps in ``cluster``'s Argo namespace, labelled for the Grafana
    sidecar; none for a cluster without a ``prometheus_url``."""
    c = cfg.clusters[cluster]
    if not c.prometheus_url:
        return []
    return [configmap(f"{uid}-dashboard", c.namespace, d) for uid, d in dashboards(cfg).items()]


def workflow_dashboard_url(grafana_url: str, cluster: str) -> str:
    """The ``dashboard_url`` that opens the workflow dashboard on a workflow from the Argo UI
    (Argo fills ``${workflow.metadata.name}`` in)."""
    base = grafana_url.rstrip("/")
    return f"{base}/d/{WORKFLOW_UID}?var-cluster={cluster}&var-workflow=${{workflow.metadata.name}}"
