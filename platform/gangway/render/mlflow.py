"""The MLflow tracking server every step writes lineage to: a Deployment and Service at the
address of ``mlflow.tracking_uri`` (``http://SERVICE.NAMESPACE.svc:PORT``), its backend store
a Postgres URI and its artifacts an S3 location, both by reference (Secrets the platform team
creates; nothing secret is rendered)."""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig

__all__ = ["mlflow_objects"]

_LABELS = {"app.kubernetes.io/name": "mlflow", "app.kubernetes.io/part-of": "gangway"}


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def mlflow_objects(cfg: PlatformConfig) -> list[dict[str, Any]]:
    """Namespace, Deployment and Service of the tracking server at ``mlflow.tracking_uri``."""
    m = cfg.mlflow
    service, namespace, port = m.service
    meta = {"namespace": namespace, "labels": _LABELS}
    container = {
        "name": "mlflow",
        "image": m.image,
        "command": ["mlflow", "server"],
        "args": [
            "--host=0.0.0.0",
            f"--port={port}",
            "--backend-store-uri=$(MLFLOW_BACKEND_STORE_URI)",
            f"--artifacts-destination={m.artifacts}",
            "--serve-artifacts",
        ],
        "env": [
            _secret_env("MLFLOW_BACKEND_STORE_URI", m.database_secret, "uri"),
            _secret_env("AWS_ACCESS_KEY_ID", cfg.storage.credentials_secret, "accessKey"),
            _secret_env("AWS_SECRET_ACCESS_KEY", cfg.storage.credentials_secret, "secretKey"),
        ],
        "ports": [{"name": "http", "containerPort": port}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "mlflow", **meta},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": _LABELS},
                "template": {
                    "metadata": {"labels": _LABELS},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
                        "containers": [container],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, **meta},
            "spec": {
                "selector": _LABELS,
                "ports": [{"name": "http", "port": port, "targetPort": "http"}],
            },
        },
    ]
