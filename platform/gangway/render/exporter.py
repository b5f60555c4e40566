"""The platform exporter on a cluster: a Deployment running ``gangway exporter --cluster NAME``
in the cluster's Argo namespace, the platform config it reads beside it (a ConfigMap), its
read-only RBAC, a Service and a ServiceMonitor (prometheus-operator, ``monitoring.coreos.com/v1``)
that has the cluster's Prometheus scrape it.

Rendered for a cluster whose ``prometheus_url`` is set (one that runs the Prometheus operator).
The ClusterRole grants ``get`` and ``list`` on exactly what a live snapshot reads
(:mod:`gangway.scheduling.snapshot.live`): Nodes, Pods, PriorityClasses and Volcano's Queues,
PodGroups and HyperNodes — nothing else, and no verb that changes anything. The pod runs as
non-root with a read-only root file system (``/tmp`` is an emptyDir).
"""

from __future__ import annotations

from typing import Any

import yaml

from gangway.config import CONFIG_ENV, PlatformConfig
from gangway.contract import METRICS_PORT_NAME
from gangway.volcano.objects import LISTED_KINDS

__all__ = ["EXPORTER", "EXPORTER_PORT", "READ_RULES", "exporter_objects"]

EXPORTER = "gangway-exporter"
"""The name of every object rendered here."""
EXPORTER_PORT = 9401
SCRAPE_INTERVAL = "30s"
"""How often the exporter reads a snapshot, and how often Prometheus scrapes it."""
READ_RULES: tuple[tuple[str, str], ...] = (
    ("", "nodes"),
    ("", "pods"),
    ("scheduling.k8s.io", "priorityclasses"),
    *((group, plural) for group, _version, plural, _kind in LISTED_KINDS),
)
"""(API group, resource) a live snapshot lists: the exporter's ClusterRole, read-only."""
_CONFIG_DIR = "/etc/gangway"
_LABELS = {"app.kubernetes.io/name": EXPORTER, "app.kubernetes.io/part-of": "gangway"}


def _meta(namespace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": EXPORTER}
    if namespace:
        out["namespace"] = namespace
    return {**out, "labels": dict(_LABELS)}


def _rbac(namespace: str) -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [group], "resources": [resource], "verbs": ["get", "list"]}
        for group, resource in READ_RULES
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": EXPORTER,
            },
            "subjects": [{"kind": "ServiceAccount", "name": EXPORTER, "namespace": namespace}],
        },
    ]


def _container(cfg: PlatformConfig, cluster: str) -> dict[str, Any]:
    return {
        "name": "exporter",
        "image": cfg.image,
        "command": ["gangway", "exporter"],
        "args": [
            f"--cluster={cluster}",
            "--host=0.0.0.0",
            f"--port={EXPORTER_PORT}",
            f"--interval={SCRAPE_INTERVAL}",
            f"--tracking-uri={cfg.mlflow.tracking_uri}",
        ],
        "env": [
            {"name": CONFIG_ENV, "value": f"{_CONFIG_DIR}/platform.yaml"},
            {"name": "HOME", "value": "/tmp"},
        ],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": EXPORTER_PORT}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": METRICS_PORT_NAME}},
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": _CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def _deployment(cfg: PlatformConfig, cluster: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(namespace),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": EXPORTER}},
            "template": {
                "metadata": {"labels": dict(_LABELS)},
                "spec": {
                    "serviceAccountName": EXPORTER,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [_container(cfg, cluster)],
                    "volumes": [
                        {"name": "config", "configMap": {"name": EXPORTER}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def _scraping(namespace: str) -> list[dict[str, Any]]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(namespace),
        "spec": {
            "selector": {"app.kubernetes.io/name": EXPORTER},
            "ports": [
                {"name": METRICS_PORT_NAME, "port": EXPORTER_PORT, "targetPort": METRICS_PORT_NAME}
            ],
        },
    }
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(namespace),
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": EXPORTER}},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "honorLabels": True,  # the exporter's own `cluster` and `namespace` win
                }
            ],
        },
    }
    return [service, monitor]


def exporter_objects(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """Everything the exporter of ``cluster`` needs (see the module docstring); none for a
    cluster without a Prometheus."""
    c = cfg.clusters[cluster]
    if not c.prometheus_url:
        return []
    text = yaml.safe_dump(cfg.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(c.namespace),
        "data": {"platform.yaml": text},
    }
    return [
        config_map,
        *_rbac(c.namespace),
        _deployment(cfg, cluster, c.namespace),
        *_scraping(c.namespace),
    ]
