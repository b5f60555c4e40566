"""Per team namespace, the lineage follower: a Deployment running
``gangway lineage sync --follow`` over the cluster's storage root, so a workflow whose exit
handler could not reach MLflow (an outage, a deleted workflow) still ends up complete in it.

It runs as the team's service account — the identity its steps write the spool with — under
the namespace's restricted Pod Security profile, and sends only that namespace's workflows.
"""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig
from gangway.contract import METRICS_PORT, METRICS_PORT_NAME, QUEUE_LABEL, TEAM_LABEL

__all__ = ["FOLLOW_INTERVAL", "lineage_followers"]

FOLLOW_INTERVAL = "60s"
"""Time between passes: exit handlers send lineage at once; this only catches up."""
_NAME = "gangway-lineage-sync"


def lineage_followers(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """One follower Deployment per team namespace of ``cluster``'s region."""
    root = cfg.storage.buckets[cfg.clusters[cluster].region]
    out = []
    for team in cfg.team_views().values():
        labels = {
            "app.kubernetes.io/name": _NAME,
            "app.kubernetes.io/part-of": "gangway",
            TEAM_LABEL: team.name,
            QUEUE_LABEL: team.queue,  # the team's admission policy asks every pod for it
        }
        container = {
            "name": "follow",
            "image": cfg.image,
            "command": ["gangway", "lineage", "sync", "--follow"],
            "args": [
                f"--spool={root.rstrip('/')}/runs",
                f"--namespace={team.namespace}",
                f"--tracking-uri={cfg.mlflow.tracking_uri}",
                f"--interval={FOLLOW_INTERVAL}",
                # Its spool backlog, for the LineageSpoolBacklog alert (render/monitoring.py
                # scrapes it where the cluster has a Prometheus).
                f"--metrics-port={METRICS_PORT}",
            ],
            "ports": [
                {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}
            ],
            "resources": {
                "requests": {"cpu": "100m", "memory": "512Mi"},
                "limits": {"memory": "1Gi"},
            },
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": _NAME, "namespace": team.namespace, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {
                        "matchLabels": {"app.kubernetes.io/name": _NAME, TEAM_LABEL: team.name}
                    },
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "serviceAccountName": team.service_account,
                            "terminationGracePeriodSeconds": 30,
                            "containers": [container],
                        },
                    },
                },
            }
        )
    return out
