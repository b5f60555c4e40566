"""Alerting rules as code: a PrometheusRule (prometheus-operator, ``monitoring.coreos.com/v1``)
per cluster with a ``prometheus_url``, its thresholds from the config's ``alerts:`` block
(:mod:`gangway.config.alerts`), each alert with its runbook (``docs/runbooks/ALERT.md``, linked
as published at ``alerts.runbook_base_url``).

The rules read three sources, by the names they are declared under:

* the step pods' own series (:data:`gangway.step.metrics.METRICS`, scraped by the PodMonitor
  of :mod:`gangway.render.monitoring`): training stalls, stale checkpoints, idle GPUs (with
  DCGM's ``DCGM_FI_DEV_GPU_UTIL``, joined on ``namespace`` and ``pod``);
* the fleet exporter's (:data:`gangway.scheduling.fleet_metrics.FLEET_METRICS`): pending
  gangs, starved queues, the exporter itself, the lineage spool;
* Argo's template metrics (:data:`gangway.workflows.metrics.TEMPLATE_METRICS`): whether the
  nightly eval ran and passed its gate.

A threshold that differs by queue (:meth:`~gangway.config.alerts.Alerts.overrides`) makes one
rule per queue that sets it, plus the rule of every other queue (``queue!~"a|b"``), under the
same alert name. :func:`rule_groups` is what a Prometheus rule file holds (``promtool`` tests
it); :func:`prometheus_rules` wraps it for the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gangway.config import PlatformConfig
from gangway.config.alerts import Alerts, seconds
from gangway.step.metrics import STEP_LABELS, spec
from gangway.workflows.metrics import ARGO_PREFIX

__all__ = ["ALERTS", "PROMETHEUS_RULE", "prometheus_rules", "rule_groups"]

PROMETHEUS_RULE = "gangway-alerts"
"""The PrometheusRule's name."""

Rule = dict[str, Any]
_BY = ", ".join(STEP_LABELS)
"""The labels one training run's step is known by, across its pods and restarts."""


_STEP_PREFIXES = ("gangway_train_", "gangway_step_", "gangway_checkpoint_")


def _m(name: str) -> str:
    """A step metric's declared name: a rename fails here, not silently in Prometheus. (The
    fleet exporter's are declared a layer above, in :mod:`gangway.scheduling.fleet_metrics`;
    a test checks the rules' names against both.)"""
    return spec(name).name if name.startswith(_STEP_PREFIXES) else name


def _sel(*matchers: str) -> str:
    found = [m for m in matchers if m]
    return "{" + ", ".join(found) + "}" if found else ""


def _rule(cfg: Alerts, name: str, expr: str, for_: str, severity: str, **text: str) -> Rule:
    rule: Rule = {"alert": name, "expr": expr}
    if seconds(for_):
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": text["summary"], "description": text["description"]}
    if cfg.runbook_base_url:  # absolute (the config check refuses a relative one)
        rule["annotations"]["runbook_url"] = f"{cfg.runbook_base_url.rstrip('/')}/{name}.md"
    return rule


def _partition(cfg: Alerts, *fields: str) -> list[tuple[str, str | None]]:
    """(queue matcher, the queue it names) of an alert whose thresholds are ``fields``: every
    queue that sets none of them (None: the defaults apply), then each queue that sets one."""
    own = sorted({q for f in fields for q in cfg.overrides(f)})
    rest = f'queue!~"{"|".join(own)}"' if own else ""
    return [(rest, None), *((f'queue="{q}"', q) for q in own)]


def _union(parts: list[str]) -> str:
    """One expression of the per-queue parts (a rule per queue would be duplicate rules)."""
    return parts[0] if len(parts) == 1 else "\nor\n".join(f"(\n{p}\n)" for p in parts)


def _limits(cfg: Alerts, field: str, show: Callable[[str | float], str] = str) -> str:
    """``field``'s threshold as a description says it: ``30m`` (``; queue a: 1h``)."""
    own = cfg.overrides(field)
    text = show(cfg.threshold(None, field))
    return text + "".join(f"; queue {q}: {show(v)}" for q, v in sorted(own.items()))


def _pending(cfg: Alerts, cluster: str) -> list[Rule]:
    oldest = _m("gangway_queue_oldest_pending_seconds")
    in_cluster = f'cluster="{cluster}"'
    parts = [
        f"{oldest}{_sel(in_cluster, q)} > {seconds(str(cfg.threshold(queue, 'pending')))}"
        for q, queue in _partition(cfg, "pending")
    ]
    limits = _limits(cfg, "pending")
    rule = _rule(
        cfg,
        "GangwayGangPendingTooLong",
        _union(parts),
        cfg.confirm_for,
        "warning",
        summary="A gang in queue {{ $labels.queue }} has waited {{ $value | humanizeDuration }}",
        description=(
            "The oldest pending gang of queue {{ $labels.queue }} on cluster "
            f"{cluster} has waited {{{{ $value | humanizeDuration }}}} (threshold {limits}). "
            f"See why: `gangway queues --cluster {cluster}`, then `gangway why WORKFLOW "
            f"--cluster {cluster}`."
        ),
    )
    return [rule]


def _fillable(cluster: str) -> str:
    """Each queue's guarantee per GPU model, as much of it as the cluster can hold:
    ``min(guarantee, allocatable)`` — guarantees are set per queue on every cluster, whatever
    models it has. ``any`` (the quota key ``gpu``) is held against the cluster's total; a model
    the cluster has no allocatable series for drops out (nothing there can fill it)."""
    c = f'cluster="{cluster}"'
    guarantee = f"{_m('gangway_queue_guarantee_gpus')}{{{c}}}"
    allocatable = f"{_m('gangway_cluster_allocatable_gpus')}{{{c}}}"
    total = f'label_replace(sum by (cluster) ({allocatable}), "gpu_model", "any", "", "")'
    capacity = f"({allocatable} or {total})"
    over = f"clamp_min({guarantee} - on (cluster, gpu_model) group_left () {capacity}, 0)"
    return f"({guarantee} - {over})"


def _starved(cfg: Alerts, cluster: str) -> list[Rule]:
    c = f'cluster="{cluster}"'
    fillable = _fillable(cluster)
    allocated = f"{_m('gangway_queue_allocated_gpus')}{{{c}}}"
    # every class of pending gang but one that no cluster could ever hold
    pending = f'{_m("gangway_queue_pending_gangs")}{{{c}, reason!="never_fits"}}'
    expr = (
        f"(\n  {fillable}\n  - ({allocated} or {fillable} * 0)\n) > 0\n"
        f"and on (cluster, queue) (sum by (cluster, queue) ({pending}) > 0)"
    )
    rule = _rule(
        cfg,
        "GangwayQueueStarved",
        expr,
        cfg.starved_for,
        "critical",
        summary="Queue {{ $labels.queue }} is under its guarantee with gangs pending",
        description=(
            "Queue {{ $labels.queue }} on cluster " + cluster + " holds {{ $value }} "
            "{{ $labels.gpu_model }} GPUs less than its guarantee (as much of it as the "
            "cluster's allocatable GPUs of that model can hold) while gangs that could run "
            f"wait, for {cfg.starved_for} now. Volcano should have reclaimed for it: "
            f"`gangway queues --cluster {cluster}`."
        ),
    )
    return [rule]


def _ended(sel: str) -> str:
    """``unless`` the step's latest attempt has ended (its end no older than its start)."""
    end = f"max by ({_BY}) ({_m('gangway_step_end_time_seconds')}{sel})"
    start = f"max by ({_BY}) ({_m('gangway_step_start_time_seconds')}{sel})"
    return f"unless on ({_BY}) ({end} >= on ({_BY}) {start})"


def _factor(v: str | float) -> str:
    return f"{float(v):g}"


def _stalled(cfg: Alerts, cluster: str) -> list[Rule]:
    parts = []
    for q, queue in _partition(cfg, "stall_factor", "stall_floor"):
        factor = _factor(cfg.threshold(queue, "stall_factor"))
        floor = seconds(str(cfg.threshold(queue, "stall_floor")))
        sel = _sel(q)
        last = f"max by ({_BY}) ({_m('gangway_train_last_step_time_seconds')}{sel})"
        step = f"max by ({_BY}) ({_m('gangway_train_step_seconds')}{sel})"
        parts.append(
            f"(time() - {last})\n"
            f"  > on ({_BY}) clamp_min({factor} * {step}, {floor})\n{_ended(sel)}"
        )
    rule = _rule(
        cfg,
        "GangwayTrainingStalled",
        _union(parts),
        cfg.confirm_for,
        "critical",
        summary="Training {{ $labels.workflow }} has made no step for "
        "{{ $value | humanizeDuration }}",
        description=(
            "Step {{ $labels.step }} of {{ $labels.workflow }} (team {{ $labels.team }}, "
            "queue {{ $labels.queue }}) has made no optimizer step for "
            "{{ $value | humanizeDuration }}: more than "
            f"{_limits(cfg, 'stall_factor', _factor)} times its recent step time, and at least "
            f"{_limits(cfg, 'stall_floor')}. Its GPUs are held while nothing moves: "
            f"`gangway status {{{{ $labels.workflow }}}} --cluster {cluster}`."
        ),
    )
    return [rule]


CHECKPOINT_WINDOW = "24h"
"""How far back the save intervals a checkpoint's age is compared with reach."""


def _checkpoint(cfg: Alerts, cluster: str) -> list[Rule]:
    """The interval between saves is measured, not configured: at each minute of the last
    :data:`CHECKPOINT_WINDOW`, the last save's time less the one a minute before is the
    interval that ended there (positive only in the minute of a save); their median is the
    run's interval."""
    parts = []
    for q, queue in _partition(cfg, "checkpoint_factor"):
        factor = _factor(cfg.threshold(queue, "checkpoint_factor"))
        sel = _sel(q)
        last = f"max by ({_BY}) ({_m('gangway_checkpoint_last_complete_time_seconds')}{sel}"
        saves = f"({last}) - {last} offset 1m) > 0)[{CHECKPOINT_WINDOW}:1m]"
        parts.append(
            f"(time() - {last}))\n"
            f"  > on ({_BY}) {factor} * quantile_over_time(0.5, {saves})\n{_ended(sel)}"
        )
    rule = _rule(
        cfg,
        "GangwayCheckpointStale",
        _union(parts),
        cfg.confirm_for,
        "warning",
        summary="Training {{ $labels.workflow }} last saved a checkpoint "
        "{{ $value | humanizeDuration }} ago",
        description=(
            "Step {{ $labels.step }} of {{ $labels.workflow }} (team {{ $labels.team }}) "
            "last committed a checkpoint {{ $value | humanizeDuration }} ago: more than "
            f"{_limits(cfg, 'checkpoint_factor', _factor)} times the median interval between "
            f"its saves of the last {CHECKPOINT_WINDOW}. A preemption now loses all of it: "
            f"`gangway status {{{{ $labels.workflow }}}} --cluster {cluster}`."
        ),
    )
    return [rule]


def _gpus_idle(cfg: Alerts, cluster: str) -> list[Rule]:
    """A GPU is idle when DCGM never saw it 1 % busy over the window; its pod counts when it
    was already a training pod at the window's start (a pod still starting is not idle)."""
    parts = []
    for q, queue in _partition(cfg, "gpu_idle"):
        window = str(cfg.threshold(queue, "gpu_idle"))
        train = f"{_m('gangway_train_step')}{_sel(q)}"
        parts.append(
            f"count by (namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL[{window}]) < 1)\n"
            f"  * on (namespace, pod) group_left ({_BY})\n"
            f"    group by ({_BY}, namespace, pod) ({train})\n"
            f"and on (namespace, pod) ({train} offset {window})"
        )
    limits = _limits(cfg, "gpu_idle")
    rule = _rule(
        cfg,
        "GangwayGPUsIdle",
        _union(parts),
        cfg.confirm_for,
        "warning",
        summary="{{ $value }} GPU(s) of training pod {{ $labels.pod }} are idle",
        description=(
            "Pod {{ $labels.namespace }}/{{ $labels.pod }} of {{ $labels.workflow }} "
            "(step {{ $labels.step }}, team {{ $labels.team }}) holds {{ $value }} GPU(s) "
            f"that DCGM never saw 1 % busy in the last {limits}. "
            f"`gangway status {{{{ $labels.workflow }}}} --cluster {cluster}`."
        ),
    )
    return [rule]


def _new_results(selector: str, window: str) -> str:
    """Results a counter series gained inside ``window``: its highest value there less its last
    value before (0 for a series first seen inside it). Not ``increase()``: Argo creates a
    result's series at its first count, which ``increase()`` would never see."""
    inside = f"max_over_time({selector}[{window}])"
    before = f"last_over_time({selector}[{window}] offset {window})"
    return f"({inside} - ({before} or {inside} * 0))"


def _nightly(cfg: Alerts, cluster: str) -> list[Rule]:
    night = cfg.nightly_eval
    if cluster not in night.clusters:
        return []
    results = f"{ARGO_PREFIX}gangway_step_results_total"
    gate = f'{results}{{pipeline="{night.pipeline}", step="{night.gate_step}"'
    window = night.max_age
    missing = (
        f"sum({_new_results(gate + '}', window)}) < 1\nor absent_over_time({gate}}}[{window}])"
    )
    failed_status = ', status="Failed"}'
    failed = f"sum by (team, queue, pipeline) ({_new_results(gate + failed_status, window)}) > 0"
    return [
        _rule(
            cfg,
            "GangwayNightlyEvalMissing",
            missing,
            cfg.confirm_for,
            "warning",
            summary=f"No nightly eval has finished on {cluster} for {window}",
            description=(
                f"Pipeline {night.pipeline} has not reached its {night.gate_step} step on "
                f"cluster {cluster} in the last {window} ({{{{ $value }}}} gate results): "
                "no verdict on last night's models. "
                "Check the CronWorkflow (`kubectl get cronworkflows -A`) and the last run "
                f"(`gangway status WORKFLOW --cluster {cluster}`)."
            ),
        ),
        _rule(
            cfg,
            "GangwayNightlyEvalRegression",
            failed,
            "0s",
            "warning",
            summary=f"The nightly eval found a regression ({window})",
            description=(
                f"Step {night.gate_step} of {night.pipeline} failed on cluster {cluster} in "
                f"the last {window} ({{{{ $value }}}} failed result(s); Argo counts each attempt "
                "and the step once more): a model version regressed against its suite's "
                f"baseline. `gangway logs WORKFLOW --step {night.gate_step} --cluster {cluster}` "
                "names it."
            ),
        ),
    ]


def _spool(cfg: Alerts, cluster: str) -> list[Rule]:
    n = cfg.spool_backlog_records
    expr = f"{_m('gangway_lineage_spool_pending_records')} >= {n}"
    rule = _rule(
        cfg,
        "GangwayLineageSpoolBacklog",
        expr,
        cfg.spool_backlog_for,
        "warning",
        summary="{{ $value }} lineage records wait for MLflow in {{ $labels.namespace }}",
        description=(
            "The lineage follower of namespace {{ $labels.namespace }} on cluster "
            f"{cluster} has had at least {n} spooled records not yet in MLflow for "
            f"{cfg.spool_backlog_for} ({{{{ $value }}}} now): MLflow is down or the follower "
            "is stuck. Nothing is lost; lineage and `gangway usage` lag until it drains."
        ),
    )
    return [rule]


def _exporter(cfg: Alerts, cluster: str) -> list[Rule]:
    last = f'{_m("gangway_exporter_last_snapshot_time_seconds")}{{cluster="{cluster}"}}'
    stale = cfg.exporter_stale
    # no series at all reads as the threshold itself: "at least that long"
    expr = (
        f"absent_over_time({last}[{stale}]) * {seconds(stale)}\n"
        f"or\ntime() - {last} > {seconds(stale)}"
    )
    rule = _rule(
        cfg,
        "GangwayExporterDown",
        expr,
        cfg.confirm_for,
        "warning",
        summary=f"The Gangway exporter of cluster {cluster} is down or stale",
        description=(
            f"Cluster {cluster} has had no good snapshot from `gangway exporter` for "
            f"{{{{ $value | humanizeDuration }}}} (threshold {stale}; at least that long when "
            "Prometheus has no series from it at all): it is down, not scraped "
            '(`up{job="gangway-exporter"}`), or cannot read the cluster '
            "(gangway_exporter_snapshot_errors_total rising). The fleet alerts (pending gangs, "
            "starved queues) are blind until it is back."
        ),
    )
    return [rule]


def _follower(cfg: Alerts, cluster: str) -> list[Rule]:
    """The lineage follower of a namespace fails: errors inside the window and no pass that
    read its spool in it (none ever, or the last one too old). A follower whose spools cannot
    all be sent (MLflow down) still reads them: that is a backlog, not this."""
    errors = _m("gangway_lineage_sync_errors_total")
    last = _m("gangway_lineage_sync_last_pass_time_seconds")
    window = cfg.follower_stale
    n = seconds(window)
    # never a good pass in the window reads as the window itself: "at least that long"
    expr = (
        f"(\n  (increase({errors}[{window}]) > 0) * 0 + {n}\n"
        f"  unless on (namespace) (time() - {last} <= {n})\n)\n"
        f"or\ntime() - {last} > {n}"
    )
    rule = _rule(
        cfg,
        "GangwayLineageFollowerFailing",
        expr,
        cfg.confirm_for,
        "warning",
        summary="The lineage follower of {{ $labels.namespace }} cannot read its spool",
        description=(
            "The lineage follower of namespace {{ $labels.namespace }} on cluster "
            f"{cluster} has failed to read its spool root for {{{{ $value | humanizeDuration }}}} "
            f"(threshold {window}; at least that long when it never has since it started): the "
            "storage is unreachable, its credentials are refused, or the root does not exist. Its "
            "pending-records count is stale meanwhile and GangwayLineageSpoolBacklog is blind: "
            "`kubectl logs deploy/gangway-lineage-sync`, then `gangway lineage sync --spool "
            "ROOT` by hand."
        ),
    )
    return [rule]


_GROUPS: dict[str, list[Callable[[Alerts, str], list[Rule]]]] = {
    "gangway-fleet": [_pending, _starved, _exporter],
    "gangway-training": [_stalled, _checkpoint, _gpus_idle],
    "gangway-lineage": [_nightly, _spool, _follower],
}

ALERTS = (
    "GangwayGangPendingTooLong",
    "GangwayQueueStarved",
    "GangwayExporterDown",
    "GangwayTrainingStalled",
    "GangwayCheckpointStale",
    "GangwayGPUsIdle",
    "GangwayNightlyEvalMissing",
    "GangwayNightlyEvalRegression",
    "GangwayLineageSpoolBacklog",
    "GangwayLineageFollowerFailing",
)
"""Every alert the rules may raise; each has ``docs/runbooks/NAME.md``."""


def rule_groups(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """The rule groups of ``cluster``, as a Prometheus rule file holds them (``groups:``)."""
    return [
        {"name": name, "rules": [r for make in makers for r in make(cfg.alerts, cluster)]}
        for name, makers in _GROUPS.items()
    ]


def prometheus_rules(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """``[the PrometheusRule]`` for a cluster whose ``prometheus_url`` is set (one that runs the
    Prometheus operator); none for one without."""
    if not cfg.clusters[cluster].prometheus_url:
        return []
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": PROMETHEUS_RULE,
            "namespace": cfg.clusters[cluster].namespace,
            "labels": {"app.kubernetes.io/part-of": "gangway"},
        },
        "spec": {"groups": rule_groups(cfg, cluster)},
    }
    return [rule]
