"""Argo's workflow-controller configuration per cluster: the S3 artifact repository of the
cluster's region (credentials by secret reference), the links from every workflow to its MLflow
runs and (with the cluster's ``dashboard_url``) to its metrics dashboard, list columns for team
and queue, pod GC defaults, and the executor (the init and wait containers of every step) from
an allowed registry with a restricted security context, so the admission policies admit the
pods Argo makes."""

from __future__ import annotations

from typing import Any

import yaml

from gangway.config import PlatformConfig
from gangway.contract import QUEUE_LABEL, TEAM_LABEL
from gangway.lineage.links import controller_links, dashboard_link

__all__ = ["controller_configmap"]


def _artifact_repository(cfg: PlatformConfig, region: str) -> dict[str, Any]:
    bucket = cfg.storage.buckets[region].removeprefix("s3://").split("/", 1)[0]
    secret = cfg.storage.credentials_secret
    return {
        "archiveLogs": True,
        "s3": {
            "bucket": bucket,
            "endpoint": f"s3.{region}.amazonaws.com",
            "region": region,
            "keyFormat": "argo/{{workflow.namespace}}/{{workflow.name}}/{{pod.name}}",
            "accessKeySecret": {"name": secret, "key": "accessKey"},
            "secretKeySecret": {"name": secret, "key": "secretKey"},
        },
    }


def controller_configmap(cfg: PlatformConfig, cluster: str) -> dict[str, Any]:
    """``workflow-controller-configmap`` for ``cluster`` (in its Argo namespace)."""
    c = cfg.clusters[cluster]
    data: dict[str, Any] = {
        "artifactRepository": _artifact_repository(cfg, c.region),
        "columns": [
            {"name": "Team", "type": "label", "key": TEAM_LABEL},
            {"name": "Queue", "type": "label", "key": QUEUE_LABEL},
        ],
        "workflowDefaults": {"spec": {"podGC": {"strategy": "OnPodSuccess"}}},
        "executor": {
            "image": cfg.executor_image,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 8737,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        },
    }
    mlflow_ui = c.mlflow_url or cfg.mlflow.ui_url
    if mlflow_ui:
        data["links"] = controller_links(mlflow_ui, c.dashboard_url)
    elif c.dashboard_url:
        data["links"] = [dashboard_link(c.dashboard_url)]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "workflow-controller-configmap", "namespace": c.namespace},
        "data": {k: yaml.safe_dump(v, sort_keys=False) for k, v in data.items()},
    }
