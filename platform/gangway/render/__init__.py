"""The cluster side, rendered from the platform config: deterministic YAML laid out for
kustomize — a base every cluster shares and an overlay per cluster.

    base/              priority classes, Volcano queues and scheduler configuration, team
                       namespaces with service accounts, RBAC and semaphores, admission
                       policies, the MLflow tracking server
    overlays/NAME/     the base plus the cluster's topology (HyperNodes or their discovery),
                       its Argo workflow-controller configuration, per team namespace the
                       lineage follower (``gangway lineage sync --follow``) and, on a cluster
                       with a Prometheus (``prometheus_url``), the PodMonitor of step pods,
                       the platform exporter (``gangway exporter``) and the Grafana
                       dashboards (fleet, team, workflow) as ConfigMaps, and on a cluster
                       with ``provisioning`` its Karpenter NodePools and EC2NodeClasses

``kubectl apply -k manifests/overlays/NAME`` installs one cluster. :func:`render` is pure;
:func:`write` and :func:`differences` are the file I/O of ``gangway manifests render``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gangway.config import PlatformConfig
from gangway.render.admission_policies import policies
from gangway.render.alerts import prometheus_rules
from gangway.render.argo import controller_configmap
from gangway.render.dashboards import dashboard_configmaps
from gangway.render.exporter import exporter_objects
from gangway.render.karpenter import karpenter_objects
from gangway.render.kube import priority_classes, team_objects
from gangway.render.lineage import lineage_followers
from gangway.render.mlflow import mlflow_objects
from gangway.render.monitoring import pod_monitors
from gangway.render.scheduling import queues, scheduler_configmap, topology
from gangway.storage import write_atomic

__all__ = ["HEADER", "differences", "render", "write"]

HEADER = "# Rendered by `gangway manifests render` from the platform config: do not edit.\n"
Objects = list[dict[str, Any]]


def _base(cfg: PlatformConfig) -> dict[str, Objects]:
    return {
        "priority-classes.yaml": priority_classes(cfg),
        "queues.yaml": queues(cfg),
        "volcano-scheduler.yaml": [scheduler_configmap()],
        "teams.yaml": [o for t in cfg.team_views().values() for o in team_objects(t)],
        "admission-policies.yaml": policies(cfg),
        "mlflow.yaml": mlflow_objects(cfg),
    }


def _cluster(cfg: PlatformConfig, name: str) -> dict[str, Objects]:
    return {
        "topology.yaml": topology(cfg, name),
        "argo-controller.yaml": [controller_configmap(cfg, name)],
        "lineage-sync.yaml": lineage_followers(cfg, name),
        "monitoring.yaml": pod_monitors(cfg, name),
        "exporter.yaml": exporter_objects(cfg, name),
        "alerts.yaml": prometheus_rules(cfg, name),
        "dashboards.yaml": dashboard_configmaps(cfg, name),
        "karpenter.yaml": karpenter_objects(cfg, name),
    }


class _Dumper(yaml.SafeDumper):
    """No ``&id001``/``*id001``: an object used twice is written twice, for reviewers."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml(objects: Objects) -> str:
    return HEADER + yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, width=100)


def _kustomization(resources: list[str]) -> str:
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    return HEADER + yaml.safe_dump(body, sort_keys=False)


def render(cfg: PlatformConfig) -> dict[str, str]:
    """Every file, relative path → text: the same config renders the same bytes."""
    files: dict[str, str] = {}
    base = _base(cfg)
    files.update({f"base/{n}": _yaml(o) for n, o in base.items() if o})
    files["base/kustomization.yaml"] = _kustomization([n for n, o in base.items() if o])
    for cluster in cfg.clusters:
        parts = _cluster(cfg, cluster)
        files.update({f"overlays/{cluster}/{n}": _yaml(o) for n, o in parts.items() if o})
        files[f"overlays/{cluster}/kustomization.yaml"] = _kustomization(
            ["../../base", *(n for n, o in parts.items() if o)]
        )
    return dict(sorted(files.items()))


def write(files: dict[str, str], out: Path) -> list[str]:
    """Write ``files`` under ``out``, removing rendered files the config no longer makes;
    the paths that changed."""
    changed = differences(files, out)
    for rel in changed:
        path = out / rel
        if rel in files:  # whole or not at all: a killed render is re-run, never half-read
            write_atomic(path, files[rel].encode())
        else:
            path.unlink()
    return changed


def differences(files: dict[str, str], out: Path) -> list[str]:
    """The paths whose text under ``out`` differs from ``files`` (missing, changed, or a
    rendered file that is no longer rendered)."""
    stale = {str(p.relative_to(out)) for p in _rendered_before(out)}
    changed = {rel for rel, text in files.items() if not _same(out / rel, text)}
    return sorted(changed | (stale - files.keys()))


def _rendered_before(out: Path) -> list[Path]:
    """Files a render wrote into ``out`` (its layout only: ``base/*.yaml`` and
    ``overlays/*/*.yaml`` starting with :data:`HEADER`); anything else is someone else's."""
    if not out.is_dir():
        return []
    found = [*out.glob("base/*.yaml"), *out.glob("overlays/*/*.yaml")]
    return [p for p in found if p.is_file() and p.read_bytes().startswith(HEADER.encode())]


def _same(path: Path, text: str) -> bool:
    return path.is_file() and path.read_bytes() == text.encode()
