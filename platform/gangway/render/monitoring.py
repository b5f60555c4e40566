"""How a cluster's Prometheus finds Gangway's steps: a PodMonitor (prometheus-operator,
``monitoring.coreos.com/v1``) in the cluster's Argo namespace that scrapes every step pod in the
team namespaces on its container port named ``metrics`` (:mod:`gangway.workflows.metrics`).

It selects pods by the label every step pod has — ``gangway.dev/pipeline``, set by the
workflow's pod metadata on container steps and by the Volcano Job's pod template on gang pods —
and copies the pod's team, queue, pipeline, step and workflow labels onto its series under
their plain names (``team``, ``queue``, ``pipeline``, ``step``, ``workflow``): the operator's
``podTargetLabels`` keep a label's name (``gangway_dev_team``), so relabelings rename them.
``honorLabels`` lets the labels a step writes itself (:mod:`gangway.step.metrics`) win over
these, so a series keeps the step's own identity.

A second PodMonitor, ``gangway-lineage-sync``, scrapes each team namespace's lineage follower
(:mod:`gangway.render.lineage`) for its spool backlog (``gangway_lineage_spool_pending_records``).

Rendered for a cluster whose ``prometheus_url`` is set: one that runs the Prometheus operator.
"""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig
from gangway.contract import (
    METRICS_PORT_NAME,
    PIPELINE_LABEL,
    QUEUE_LABEL,
    STEP_LABEL,
    TEAM_LABEL,
    WORKFLOW_LABEL,
)

__all__ = ["FOLLOWER_MONITOR", "POD_MONITOR", "TARGET_LABELS", "pod_monitor", "pod_monitors"]

POD_MONITOR = "gangway-steps"
"""The steps' PodMonitor's name."""
FOLLOWER_MONITOR = "gangway-lineage-sync"
"""The lineage followers' PodMonitor's name (their pods' ``app.kubernetes.io/name``)."""

TARGET_LABELS: dict[str, str] = {
    TEAM_LABEL: "team",
    QUEUE_LABEL: "queue",
    PIPELINE_LABEL: "pipeline",
    STEP_LABEL: "step",
    WORKFLOW_LABEL: "workflow",
}
"""Pod label → the label its value gets on every series scraped from the pod."""


def _meta_label(pod_label: str) -> str:
    """Prometheus's service-discovery label holding a pod label's value (every character
    outside ``[a-zA-Z0-9_]`` becomes ``_``)."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in pod_label)
    return f"__meta_kubernetes_pod_label_{safe}"


def _relabelings() -> list[dict[str, Any]]:
    return [
        {"action": "replace", "sourceLabels": [_meta_label(pod)], "targetLabel": plain}
        for pod, plain in TARGET_LABELS.items()
    ]


def _monitor(
    cfg: PlatformConfig, cluster: str, name: str, selector: dict[str, Any], endpoint: dict[str, Any]
) -> dict[str, Any]:
    """A PodMonitor in ``cluster``'s Argo namespace over every team namespace."""
    namespaces = sorted({t.namespace for t in cfg.team_views().values()})
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": name,
            "namespace": cfg.clusters[cluster].namespace,
            "labels": {"app.kubernetes.io/part-of": "gangway"},
        },
        "spec": {
            "selector": selector,
            "namespaceSelector": {"matchNames": namespaces},
            "podMetricsEndpoints": [
                {"port": METRICS_PORT_NAME, "path": "/metrics", "honorLabels": True, **endpoint}
            ],
        },
    }


def pod_monitor(cfg: PlatformConfig, cluster: str) -> dict[str, Any]:
    """The PodMonitor of ``cluster``: every Gangway step pod of every team namespace."""
    selector = {"matchExpressions": [{"key": PIPELINE_LABEL, "operator": "Exists"}]}
    return _monitor(cfg, cluster, POD_MONITOR, selector, {"relabelings": _relabelings()})


def follower_monitor(cfg: PlatformConfig, cluster: str) -> dict[str, Any]:
    """The PodMonitor of the lineage followers of every team namespace: their own labels
    (``namespace``) are kept."""
    selector = {"matchLabels": {"app.kubernetes.io/name": FOLLOWER_MONITOR}}
    return _monitor(cfg, cluster, FOLLOWER_MONITOR, selector, {})


def pod_monitors(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """The steps' and the lineage followers' PodMonitors for a cluster whose
    ``prometheus_url`` is set; none for one without a Prometheus (whose API server would not
    know the kind)."""
    if not cfg.clusters[cluster].prometheus_url:
        return []
    return [pod_monitor(cfg, cluster), follower_monitor(cfg, cluster)]
