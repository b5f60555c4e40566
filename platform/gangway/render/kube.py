"""The platform config as core Kubernetes objects: PriorityClasses, and per team a namespace,
the workflow service account with least-privilege RBAC, and the semaphore of its workflows."""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig, TeamView
from gangway.contract import SEMAPHORE_CONFIGMAP, TEAM_LABEL
from gangway.step.caching import CACHE_CONFIGMAP
from gangway.volcano.job import JOB_API_GROUP, JOB_RESOURCE

__all__ = ["RBAC_RULES", "priority_classes", "team_objects"]

RBAC_RULES: list[tuple[str, str, tuple[str, ...], str]] = [
    (
        JOB_API_GROUP,
        JOB_RESOURCE,
        ("create", "get", "list", "watch"),
        "a gang step's resource template creates its Volcano Job and watches it until the "
        "success or failure condition holds (deletion is by owner reference, not by the step)",
    ),
    (
        "argoproj.io",
        "workflowtaskresults",
        ("create", "patch"),
        "every step's executor reports its outputs and progress as a WorkflowTaskResult",
    ),
    (
        "",
        "pods/log",
        ("get",),
        "a step may read the logs of the gang pods it started (their error summary)",
    ),
]
"""Everything a workflow's service account may do, each with why — nothing else, nothing
cluster-wide. ``tests/unit/render/test_render.py`` lists every verb granted."""


def priority_classes(cfg: PlatformConfig) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": pc.value,
            "preemptionPolicy": "PreemptLowerPriority" if pc.preemptible else "Never",
            "globalDefault": False,
            "description": pc.description or f"Gangway priority class {name}",
        }
        for name, pc in sorted(cfg.priority_classes.items(), key=lambda kv: -kv[1].value)
    ]


def team_objects(team: TeamView) -> list[dict[str, Any]]:
    """The team's namespace, service account, Role + RoleBinding, semaphore ConfigMap and
    step cache ConfigMap."""
    ns = team.namespace
    labels = {TEAM_LABEL: team.name}
    meta = {"namespace": ns, "labels": labels}
    ns_labels = {**labels, "pod-security.kubernetes.io/enforce": "restricted"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": ns_labels}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": team.service_account, **meta},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": team.service_account, **meta},
            "rules": [
                {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
                for group, resource, verbs, _why in RBAC_RULES
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": team.service_account, **meta},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": team.service_account,
            },
            "subjects": [{"kind": "ServiceAccount", "name": team.service_account, "namespace": ns}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SEMAPHORE_CONFIGMAP, **meta},
            "data": {team.name: str(team.max_workflows)},
        },
        {  # where Argo memoizes cacheable steps; the label lets Argo use it as a cache
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CACHE_CONFIGMAP,
                "namespace": ns,
                "labels": {**labels, "workflows.argoproj.io/configmap-type": "Cache"},
            },
        },
    ]
