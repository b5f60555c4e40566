"""Where the cluster is: connection settings from flags, the environment, or the platform config.

Precedence: an explicit ``--cluster NAME`` (a cluster of the platform config,
:mod:`gangway.config`: the file named by ``GANGWAY_CONFIG``, else the shipped example), else
the Argo CLI's own environment (``ARGO_SERVER``, ``ARGO_TOKEN``, ``ARGO_NAMESPACE``,
``ARGO_INSECURE_SKIP_VERIFY``, ``ARGO_BASE_HREF``). Nothing configured is a clear error, never a
guess. ``GANGWAY_MLFLOW_URL`` (or a cluster's ``mlflow_url``, else the config's
``mlflow.ui_url``) names the MLflow server as users reach it, for the workflow's link to its
MLflow runs; ``GANGWAY_PROMETHEUS_URL`` (or a cluster's ``prometheus_url``) the Prometheus
that scrapes its Gangway pods.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from gangway.errors import PermanentError

__all__ = ["ClusterConfig", "resolve_cluster"]


@dataclass(frozen=True)
class ClusterConfig:
    """How to reach one cluster's Argo server (and its kube context for pods and CRDs)."""

    name: str
    argo_server: str
    namespace: str = "argo"
    token: str | None = None
    verify_ssl: bool = True
    kube_context: str | None = None
    ui_url: str | None = None
    mlflow_url: str | None = None
    """The MLflow server as users reach it (UI links; the experiment id for the Argo link)."""
    prometheus_url: str | None = None
    """The Prometheus that scrapes the cluster's Gangway pods (progress in ``status``)."""

    @property
    def base_url(self) -> str:
        s = self.argo_server
        return s if s.startswith(("http://", "https://")) else f"https://{s}"

    def workflow_url(self, name: str, namespace: str | None = None) -> str:
        """The Argo UI page of a workflow."""
        base = (self.ui_url or self.base_url).rstrip("/")
        return f"{base}/workflows/{namespace or self.namespace}/{name}"


def _bool(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true", "yes")


def resolve_cluster(name: str | None, env: Mapping[str, str] | None = None) -> ClusterConfig:
    """The cluster to talk to (see the module docstring for precedence)."""
    env = os.environ if env is None else env
    if name:
        return _from_config(name, env)
    server = env.get("ARGO_SERVER")
    if not server:
        raise PermanentError(
            "no cluster configured: set ARGO_SERVER (and ARGO_TOKEN, ARGO_NAMESPACE) as for the "
            "argo CLI, or pass --cluster NAME with GANGWAY_CONFIG (`gangway submit --dry-run` "
            "shows what would be sent, without a cluster)"
        )
    token = env.get("ARGO_TOKEN") or None
    if token and not token.lower().startswith("bearer "):
        token = f"Bearer {token}"
    return ClusterConfig(
        name="env",
        argo_server=server,
        namespace=env.get("ARGO_NAMESPACE", "argo"),
        token=token,
        verify_ssl=not _bool(env.get("ARGO_INSECURE_SKIP_VERIFY")),
        ui_url=env.get("ARGO_BASE_HREF") or None,
        mlflow_url=env.get("GANGWAY_MLFLOW_URL") or None,
        prometheus_url=env.get("GANGWAY_PROMETHEUS_URL") or None,
    )


def _from_config(name: str, env: Mapping[str, str]) -> ClusterConfig:
    """Cluster ``name`` of the platform config (:mod:`gangway.config`)."""
    from gangway.config import config_path, load_config

    path = config_path(env)
    cfg = load_config(path)
    if name not in cfg.clusters:
        raise PermanentError(
            f"--cluster {name}: not in {path}; known: " + (", ".join(sorted(cfg.clusters)))
        )
    c = cfg.clusters[name]
    return ClusterConfig(
        name=name,
        argo_server=c.argo_server,
        namespace=c.namespace,
        token=env.get(c.token_env) if c.token_env else None,
        verify_ssl=not c.insecure_skip_verify,
        kube_context=c.kube_context,
        ui_url=c.argo_ui,
        mlflow_url=c.mlflow_url or env.get("GANGWAY_MLFLOW_URL") or cfg.mlflow.ui_url,
        prometheus_url=c.prometheus_url or env.get("GANGWAY_PROMETHEUS_URL") or None,
    )
