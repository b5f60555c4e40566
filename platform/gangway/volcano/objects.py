"""Reading Volcano's scheduling objects as the API returns them — Queues, PodGroups,
HyperNodes — into plain values for a snapshot, and the PodGroup conditions that say why a
gang is pending (Volcano records them on the PodGroup, not on the Job)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.units import quota_from_resource_list

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "HYPERNODE_KIND",
    "LISTED_KINDS",
    "PODGROUP_KIND",
    "QUEUE_KIND",
    "SCHEDULING_GROUP",
    "SCHEDULING_VERSION",
    "TOPOLOGY_GROUP",
    "TOPOLOGY_VERSION",
    "Condition",
    "HyperNodeInfo",
    "PodGroupInfo",
    "QueueInfo",
    "read_hypernode",
    "read_podgroup",
    "read_queue",
]

QUEUE_KIND = "Queue"
PODGROUP_KIND = "PodGroup"
HYPERNODE_KIND = "HyperNode"
SCHEDULING_GROUP, SCHEDULING_VERSION = "scheduling.volcano.sh", "v1beta1"
"""Queues and PodGroups."""
TOPOLOGY_GROUP, TOPOLOGY_VERSION = "topology.volcano.sh", "v1alpha1"
"""HyperNodes."""
LISTED_KINDS = (
    (SCHEDULING_GROUP, SCHEDULING_VERSION, "queues", QUEUE_KIND),
    (SCHEDULING_GROUP, SCHEDULING_VERSION, "podgroups", PODGROUP_KIND),
    (TOPOLOGY_GROUP, TOPOLOGY_VERSION, "hypernodes", HYPERNODE_KIND),
)
"""What a snapshot lists of Volcano's objects: API group, version, plural, kind."""
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""The annotation Volcano puts on each pod of a gang: its PodGroup's name."""


@dataclass(frozen=True)
class QueueInfo:
    name: str
    parent: str
    weight: int
    reclaimable: bool
    guarantee: dict[str, Any]
    deserved: dict[str, Any]
    capability: dict[str, Any]


def read_queue(obj: Mapping[str, Any]) -> QueueInfo:
    spec = obj.get("spec") or {}
    return QueueInfo(
        name=str((obj.get("metadata") or {}).get("name")),
        parent=str(spec.get("parent") or "root"),
        weight=int(spec.get("weight") or 1),
        reclaimable=bool(spec.get("reclaimable", True)),
        guarantee=quota_from_resource_list((spec.get("guarantee") or {}).get("resource")),
        deserved=quota_from_resource_list(spec.get("deserved")),
        capability=quota_from_resource_list(spec.get("capability")),
    )


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    when: str | None


@dataclass(frozen=True)
class PodGroupInfo:
    name: str
    namespace: str
    queue: str
    min_member: int
    priority_class: str | None
    phase: str
    conditions: tuple[Condition, ...]
    created: str | None
    labels: dict[str, str]
    owner: str | None
    """The Job that owns it."""
    highest_tier: int | None


def read_podgroup(obj: Mapping[str, Any]) -> PodGroupInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owners = [o.get("name") for o in meta.get("ownerReferences") or [] if o.get("name")]
    tier = (spec.get("networkTopology") or {}).get("highestTierAllowed")
    return PodGroupInfo(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace") or "default"),
        queue=str(spec.get("queue") or "default"),
        min_member=int(spec.get("minMember") or 1),
        priority_class=spec.get("priorityClassName") or None,
        phase=str(status.get("phase") or "Pending"),
        conditions=tuple(
            Condition(
                str(c.get("type", "")),
                str(c.get("status", "")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
                c.get("lastTransitionTime"),
            )
            for c in status.get("conditions") or []
        ),
        created=meta.get("creationTimestamp"),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        owner=owners[0] if owners else None,
        highest_tier=int(tier) if tier is not None else None,
    )


@dataclass(frozen=True)
class HyperNodeInfo:
    name: str
    tier: int
    tier_name: str | None
    nodes: tuple[str, ...]
    """Member nodes (exact names), at tier 1."""
    children: tuple[str, ...]
    """Member HyperNodes (exact names), above tier 1."""


def read_hypernode(obj: Mapping[str, Any]) -> HyperNodeInfo:
    spec = obj.get("spec") or {}
    nodes: list[str] = []
    children: list[str] = []
    for m in spec.get("members") or []:
        name = ((m.get("selector") or {}).get("exactMatch") or {}).get("name")
        if not name:
            continue  # regex and label selectors: not resolved here
        (nodes if m.get("type") == "Node" else children).append(str(name))
    return HyperNodeInfo(
        name=str((obj.get("metadata") or {}).get("name")),
        tier=int(spec.get("tier") or 1),
        tier_name=spec.get("tierName") or None,
        nodes=tuple(nodes),
        children=tuple(children),
    )
