"""Volcano's cluster side of the platform config: hierarchical Queues, HyperNodes (or the
label-based discovery that makes them), and the scheduler's configuration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gangway.volcano.objects import (
    SCHEDULING_GROUP,
    SCHEDULING_VERSION,
    TOPOLOGY_GROUP,
    TOPOLOGY_VERSION,
)

__all__ = [
    "HOSTNAME_LABEL",
    "SCHEDULER_ACTIONS",
    "SCHEDULER_TIERS",
    "discovery_config",
    "hypernode",
    "queue",
    "scheduler_config",
]

QUEUE_API = f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}"
HYPERNODE_API = f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}"
HOSTNAME_LABEL = "kubernetes.io/hostname"

SCHEDULER_ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
"""enqueue admits a gang only when its minAvailable fits; allocate places it whole; preempt
evicts lower-priority gangs within a queue; reclaim takes back from queues above their deserved
share; backfill fills what is left with small pods."""
SCHEDULER_TIERS: list[list[dict[str, Any]]] = [
    [
        {"name": "priority"},
        {"name": "gang", "enablePreemptable": False},
        {"name": "conformance"},
    ],
    [
        {"name": "drf", "enablePreemptable": False},
        {"name": "predicates"},
        {"name": "capacity", "enableHierarchy": True},
        {"name": "nodeorder"},
        {"name": "binpack"},
        {"name": "network-topology-aware"},
    ],
]
"""priority orders jobs (PriorityClass values) and picks preemption victims; gang keeps jobs
whole; capacity enforces guarantee/deserved/capability on hierarchical queues (it replaces
proportion, which cannot be combined with it); network-topology-aware scores HyperNodes so a
gang lands in as few topology domains as possible."""


def queue(
    name: str,
    *,
    parent: str,
    weight: int,
    reclaimable: bool,
    guarantee: Mapping[str, str],
    deserved: Mapping[str, str],
    capability: Mapping[str, str] | None,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """A Queue under ``parent`` (``root`` for a top-level one)."""
    spec: dict[str, Any] = {"parent": parent, "weight": weight, "reclaimable": reclaimable}
    if guarantee:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if deserved:
        spec["deserved"] = dict(deserved)
    if capability:
        spec["capability"] = dict(capability)
    return {
        "apiVersion": QUEUE_API,
        "kind": "Queue",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": spec,
    }


def hypernode(name: str, *, tier: int, members: list[str], nodes: bool) -> dict[str, Any]:
    """A HyperNode of ``tier`` over nodes (``nodes=True``) or lower-tier HyperNodes."""
    kind = "Node" if nodes else "HyperNode"
    return {
        "apiVersion": HYPERNODE_API,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def discovery_config(name: str, labels_closest_first: list[str]) -> str:
    """The controller's label-based HyperNode discovery for one topology: levels from the
    widest domain down to the node (the hostname label ends it)."""
    levels = [{"nodeLabel": label} for label in reversed(labels_closest_first)]
    conf = {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {name: [*levels, {"nodeLabel": HOSTNAME_LABEL}]}
                },
            }
        ]
    }
    return yaml.safe_dump(conf, sort_keys=False)


def scheduler_config() -> str:
    """``volcano-scheduler.conf``: the actions and plugin tiers above."""
    conf = {
        "actions": ", ".join(SCHEDULER_ACTIONS),
        "tiers": [{"plugins": plugins} for plugins in SCHEDULER_TIERS],
    }
    return yaml.safe_dump(conf, sort_keys=False)
