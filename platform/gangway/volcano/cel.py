"""Volcano's side of the admission policies that :mod:`gangway.render.admission_policies` renders:
the resource rule that matches Volcano Jobs, CEL fragments that reach into a Job (its pod
templates, queue, priority class, task replicas), the field paths messages name, and the keys
by which Volcano puts a pod in a queue.

The CEL here is written in the subset that both Kubernetes and ``cel-python`` (the tests)
evaluate: ``has()`` one field at a time, ``map``/``all``/``filter``, no Kubernetes-only
library functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gangway.volcano.job import JOB_API_GROUP, JOB_API_VERSION, JOB_RESOURCE

__all__ = [
    "JOB_POD_SPECS",
    "JOB_POD_SPEC_PATH",
    "JOB_PRIORITY_CLASS",
    "JOB_PRIORITY_CLASS_PATH",
    "JOB_QUEUE",
    "JOB_QUEUE_PATH",
    "JOB_TASK_REPLICAS_PATH",
    "POD_QUEUE_ANNOTATIONS",
    "POD_QUEUE_LABEL",
    "job_resource_rule",
    "job_task_totals",
]

JOB_POD_SPECS = "object.spec.tasks.map(t, t.template.spec)"
"""CEL: the pod spec of each task's template, in task order."""
JOB_POD_SPEC_PATH = "spec.tasks[*].template.spec"
"""Where a Job's pod specs are, as a message names them."""
JOB_QUEUE = "object.spec.queue"
"""CEL: the queue the Job's pod group goes to (Volcano's webhook fills ``default`` when it
is unset, before validating policies run)."""
JOB_QUEUE_PATH = "spec.queue"
JOB_PRIORITY_CLASS = "object.spec.priorityClassName"
"""CEL: the Job's priority class; Volcano gives it to every pod whose template has none."""
JOB_PRIORITY_CLASS_PATH = "spec.priorityClassName"
JOB_TASK_REPLICAS_PATH = "spec.tasks[*].replicas"

POD_QUEUE_LABEL = "volcano.sh/queue-name"
"""Volcano's job controller labels (and annotates) every pod of a Job with the Job's queue;
the scheduler reads a pod's queue from this label first."""
POD_QUEUE_ANNOTATIONS = (POD_QUEUE_LABEL, "scheduling.volcano.sh/queue-name")
"""The annotations the scheduler reads a pod's queue from when the label is absent."""


def job_resource_rule(operations: Sequence[str]) -> dict[str, list[str]]:
    """An admission ``resourceRules`` entry matching Volcano Jobs on ``operations``."""
    version = JOB_API_VERSION.split("/", 1)[1]
    return {
        "apiGroups": [JOB_API_GROUP],
        "apiVersions": [version],
        "resources": [JOB_RESOURCE],
        "operations": list(operations),
    }


def job_task_totals(per_pod: Callable[[str], str]) -> str:
    """CEL: a list with, for each task, its replicas times ``per_pod(spec)`` — ``per_pod``
    turns the CEL of one task's pod spec into the CEL of an int (e.g. its GPUs)."""
    replicas = "(has(t.replicas) ? t.replicas : 0)"
    return f"object.spec.tasks.map(t, {replicas} * {per_pod('t.template.spec')})"
