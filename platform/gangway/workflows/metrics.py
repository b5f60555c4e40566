"""What a compiled step exposes to Prometheus: the container port its pod serves its own
``/metrics`` on (:data:`~gangway.contract.METRICS_PORT`, named ``metrics``, which the rendered
PodMonitor scrapes: :mod:`gangway.render.monitoring`), and Argo's custom metrics on its
template — what only the controller knows: how long the step took, how it ended, how often it
was retried.

Argo (v4.1) computes a template's ``metrics.prometheus`` when the node ends, filling
``{{duration}}``, ``{{status}}`` and, on a retried step, ``{{retries}}``; it serves them on the
controller's metrics endpoint with ``argo_workflows_`` before each name and no suffix added
(the names here carry ``_total`` and ``_seconds`` themselves). Names and label keys must match
``^[a-zA-Z_][a-zA-Z0-9_]*$``, and one name keeps one type, help text and bucket list across every
workflow: :data:`TEMPLATE_METRICS` is the one place they are declared. Labels are bounded —
team, queue, pipeline (the workflow's labels), the step's name and, where it says, its status —
never the workflow's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hera.workflows import models as m

from gangway.contract import (
    METRICS_PORT,
    METRICS_PORT_NAME,
    PIPELINE_LABEL,
    QUEUE_LABEL,
    TEAM_LABEL,
)

__all__ = [
    "ARGO_PREFIX",
    "DURATION_BUCKETS",
    "TEMPLATE_METRICS",
    "TemplateMetric",
    "metrics_port",
    "template_metrics",
]

ARGO_PREFIX = "argo_workflows_"
"""What Argo's controller puts before a custom metric's name on its ``/metrics``."""

DURATION_BUCKETS: tuple[float, ...] = (
    10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0,
)  # fmt: skip
"""Step durations, in seconds: from a cache hit to a day of training."""

_WHO = ("team", "queue", "pipeline", "step")
"""The labels of every template metric: whose run it is and which step of it."""


@dataclass(frozen=True)
class TemplateMetric:
    """One custom metric on every step template: its name, type, labels, the Argo variable
    that gives its value, and what it means (its help text, the same in every workflow)."""

    name: str
    kind: Literal["counter", "gauge", "histogram"]
    labels: tuple[str, ...]
    value: str
    meaning: str


TEMPLATE_METRICS: tuple[TemplateMetric, ...] = (
    TemplateMetric(
        "gangway_step_duration_seconds",
        "histogram",
        (*_WHO, "status"),
        "{{duration}}",
        "How long a Gangway step took, from its start to its end, by how it ended.",
    ),
    TemplateMetric(
        "gangway_step_results_total",
        "counter",
        (*_WHO, "status"),
        "1",
        "Gangway steps that ended, by status (Succeeded, Failed, Error).",
    ),
    TemplateMetric(
        "gangway_step_retries",
        "gauge",
        _WHO,
        "{{retries}}",
        "How many times the latest run of a Gangway step was retried.",
    ),
)
"""Every custom metric a compiled step template carries."""


def _label_values(step_name: str) -> dict[str, str]:
    return {
        "team": "{{workflow.labels." + TEAM_LABEL + "}}",
        "queue": "{{workflow.labels." + QUEUE_LABEL + "}}",
        "pipeline": "{{workflow.labels." + PIPELINE_LABEL + "}}",
        "step": step_name,
        "status": "{{status}}",
    }


def _prometheus(metric: TemplateMetric, values: dict[str, str]) -> m.Prometheus:
    labels = [m.MetricLabel(key=k, value=values[k]) for k in metric.labels]
    kind: dict[str, m.Counter | m.Gauge | m.Histogram] = {}
    if metric.kind == "counter":
        kind["counter"] = m.Counter(value=metric.value)
    elif metric.kind == "gauge":
        kind["gauge"] = m.Gauge(value=metric.value, realtime=False)
    else:
        buckets = [m.Amount(b) for b in DURATION_BUCKETS]
        kind["histogram"] = m.Histogram(value=metric.value, buckets=buckets)
    return m.Prometheus(name=metric.name, help=metric.meaning, labels=labels, **kind)


def template_metrics(step_name: str) -> m.Metrics:
    """The ``metrics`` of the template of step ``step_name``: every :data:`TEMPLATE_METRICS`."""
    values = _label_values(step_name)
    return m.Metrics(prometheus=[_prometheus(t, values) for t in TEMPLATE_METRICS])


def metrics_port() -> m.ContainerPort:
    """The container port a step's pod serves its own metrics on, named for the PodMonitor."""
    return m.ContainerPort(name=METRICS_PORT_NAME, container_port=METRICS_PORT, protocol="TCP")
