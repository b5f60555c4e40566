"""The platform config as Volcano objects: org and team Queues, the scheduler's
configuration, and each cluster's topology (HyperNodes, or the labels they are discovered
from)."""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig
from gangway.config.schema import Quota
from gangway.contract import TEAM_LABEL
from gangway.volcano.queues import discovery_config, hypernode, queue, scheduler_config

__all__ = ["VOLCANO_NAMESPACE", "queues", "scheduler_configmap", "topology"]

VOLCANO_NAMESPACE = "volcano-system"
ORG_LABEL = "gangway.dev/org"


def _queue(name: str, parent: str, q: Quota, labels: dict[str, str]) -> dict[str, Any]:
    return queue(
        name,
        parent=parent,
        weight=q.weight,
        reclaimable=q.reclaimable,
        guarantee=q.guarantee.resource_list(),
        deserved=q.deserved.resource_list(),
        capability=q.capability.resource_list() if q.capability else None,
        labels=labels,
    )


def queues(cfg: PlatformConfig) -> list[dict[str, Any]]:
    """A parent Queue per org, a leaf per team (standalone teams under Volcano's root)."""
    out = [
        _queue(cfg.org_queue(name), "root", org, {ORG_LABEL: name})
        for name, org in cfg.orgs.items()
    ]
    for team in cfg.team_views().values():
        labels = {TEAM_LABEL: team.name, **({ORG_LABEL: team.org} if team.org else {})}
        out.append(_queue(team.queue, team.parent_queue, team.quota, labels))
    return out


def _configmap(name: str, key: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": VOLCANO_NAMESPACE},
        "data": {key: text},
    }


def scheduler_configmap() -> dict[str, Any]:
    """Replaces the one Volcano installs: see :data:`gangway.volcano.queues.SCHEDULER_TIERS`."""
    return _configmap("volcano-scheduler-configmap", "volcano-scheduler.conf", scheduler_config())


def topology(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """The cluster's HyperNodes as configured, or the controller's discovery of them from
    node labels."""
    topo = cfg.clusters[cluster].topology
    if topo.hypernodes:
        lowest = min(spec.tier for spec in topo.hypernodes.values())
        return [
            hypernode(name, tier=spec.tier, members=spec.members, nodes=spec.tier == lowest)
            for name, spec in sorted(topo.hypernodes.items(), key=lambda kv: (kv[1].tier, kv[0]))
        ]
    if topo.labels:
        text = discovery_config(f"gangway-{cluster}", list(topo.labels.values()))
        return [_configmap("volcano-controller-configmap", "volcano-controller.conf", text)]
    return []
