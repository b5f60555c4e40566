"""A cluster's snapshot from its Kubernetes API objects — Nodes, Pods, PriorityClasses and
Volcano's Queues, PodGroups and HyperNodes — as the API returns them (live, or recorded with
``kubectl get -o yaml``). Pure: the live reader (:mod:`gangway.scheduling.snapshot.live`) only
fetches.

* A node's GPU model is its ``nvidia.com/gpu.product`` label, named back through the config's
  ``gpu_products``; its topology domains are its tier labels, or the HyperNodes it is in.
* A node's allocated amount is what its running pods request.
* Each PodGroup is a gang: its pods' requests (the largest pod, resource by resource), the
  nodes they run on, its queue and priority; Running once Volcano says so.
* Queues keep Volcano's totals (``gpu`` counts every model); ``extra_quota`` adds what only the
  platform config knows (``gpu/MODEL``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from gangway.contract import WORKFLOW_LABEL
from gangway.scheduling.snapshot.cluster_state import ClusterState, Gang, Node, PriorityInfo
from gangway.units import GPU_PRODUCT_LABEL, GPU_RESOURCE
from gangway.volcano.demand import pod_requests
from gangway.volcano.objects import (
    GROUP_NAME_ANNOTATION,
    HYPERNODE_KIND,
    PODGROUP_KIND,
    QUEUE_KIND,
    read_hypernode,
    read_podgroup,
    read_queue,
)

__all__ = ["cluster_from_objects", "priority_classes"]

DONE = ("Succeeded", "Failed")


def _by_kind(objs: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for o in objs:
        if isinstance(o, Mapping):
            out[str(o.get("kind"))].append(o)
    return out


def priority_classes(objs: Iterable[Mapping[str, Any]]) -> dict[str, PriorityInfo]:
    """The cluster's PriorityClasses: value, and whether its pods may preempt."""
    return {
        str((o.get("metadata") or {}).get("name")): PriorityInfo(
            value=int(o.get("value") or 0),
            preempting=o.get("preemptionPolicy", "PreemptLowerPriority") != "Never",
        )
        for o in _by_kind(objs).get("PriorityClass", [])
    }


def _pod_request(pod: Mapping[str, Any]) -> tuple[int, int, int]:
    cpu, memory, gpus = pod_requests(pod.get("spec") or {})
    return cpu, memory, int(gpus)


def _domains(
    nodes: list[Mapping[str, Any]],
    hypernodes: list[Mapping[str, Any]],
    labels: Mapping[str, str],
) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The tiers (closest first) and each node's domain at each."""
    if labels:
        return list(labels), {
            str(n["metadata"]["name"]): {
                tier: str(v)
                for tier, label in labels.items()
                if (v := ((n["metadata"].get("labels") or {}).get(label))) is not None
            }
            for n in nodes
        }
    infos = [read_hypernode(h) for h in hypernodes]
    top = max((h.tier for h in infos), default=0)
    names = {h.tier: h.tier_name for h in infos if h.tier_name}
    tiers = [names.get(t, f"tier{t}") for t in range(1, top + 1)]
    parent = {c: h for h in infos for c in h.children}
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for h in infos:
        for node in h.nodes:
            at = h
            seen: set[str] = set()
            while at is not None and at.name not in seen:
                seen.add(at.name)
                out[node][tiers[at.tier - 1]] = at.name
                at = parent.get(at.name)  # type: ignore[assignment]
    return tiers, dict(out)


def _nodes(
    raw: list[Mapping[str, Any]],
    pods: list[Mapping[str, Any]],
    domains: Mapping[str, dict[str, str]],
    products: Mapping[str, str],
) -> list[Node]:
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and (p.get("status") or {}).get("phase") not in DONE:
            used[node] = [a + b for a, b in zip(used[node], _pod_request(p), strict=True)]
    to_model = {v: k for k, v in products.items()}
    out = []
    for n in raw:
        name = str(n["metadata"]["name"])
        label = (n["metadata"].get("labels") or {}).get(GPU_PRODUCT_LABEL)
        alloc = (n.get("status") or {}).get("allocatable") or {}
        gpus = int(float(str(alloc.get(GPU_RESOURCE, 0))))
        u = used[name]
        out.append(
            Node.model_validate(
                {
                    "name": name,
                    "gpu_type": to_model.get(label, label) if label and gpus else None,
                    "allocatable": {
                        "cpu": alloc.get("cpu", 0),
                        "memory": alloc.get("memory", 0),
                        "gpus": gpus,
                    },
                    "allocated": {"cpu": f"{u[0]}m", "memory": u[1], "gpus": u[2]},
                    "domains": domains.get(name, {}),
                    "schedulable": not (n.get("spec") or {}).get("unschedulable", False),
                }
            )
        )
    return out


def _gangs(
    groups: list[Mapping[str, Any]],
    pods: list[Mapping[str, Any]],
    nodes: list[Node],
    classes: Mapping[str, PriorityInfo],
) -> list[Gang]:
    members: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for p in pods:
        meta = p.get("metadata") or {}
        group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if group and (p.get("status") or {}).get("phase") not in DONE:
            members[(str(meta.get("namespace") or "default"), group)].append(p)
    model = {n.name: n.gpu_type for n in nodes}
    out = []
    for g in groups:
        info = read_podgroup(g)
        mine = members.get((info.namespace, info.name), [])
        shapes = [_pod_request(p) for p in mine] or [(0, 0, 0)]
        per = [max(s[i] for s in shapes) for i in range(3)]
        placement: dict[str, int] = defaultdict(int)
        for p in mine:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                placement[str(node)] += 1
        running = info.phase == "Running" and sum(placement.values()) >= info.min_member
        gpu_type = next((model[n] for n in placement if model.get(n)), None)
        cls = classes.get(info.priority_class or "")
        out.append(
            Gang.model_validate(
                {
                    "name": info.name,
                    "namespace": info.namespace,
                    "queue": info.queue,
                    "priority_class": info.priority_class,
                    "priority": cls.value if cls else 0,
                    "pods": sum(placement.values()) if running else max(info.min_member, len(mine)),
                    "per_pod": {"cpu": f"{per[0]}m", "memory": per[1], "gpus": per[2]},
                    "gpu_type": gpu_type if per[2] else None,
                    "phase": "Running" if running else "Pending",
                    "placement": dict(placement) if running else {},
                    "workflow": info.labels.get(WORKFLOW_LABEL) or _label(mine, WORKFLOW_LABEL),
                    "created_at": info.created,
                    "started_at": info.created if running else None,
                }
            )
        )
    return out


def _label(pods: list[Mapping[str, Any]], key: str) -> str | None:
    """``key``'s value on the first of ``pods`` that has it."""
    for p in pods:
        value = ((p.get("metadata") or {}).get("labels") or {}).get(key)
        if value:
            return str(value)
    return None


def cluster_from_objects(
    objs: Iterable[Mapping[str, Any]],
    *,
    region: str,
    gpu_products: Mapping[str, str] | None = None,
    topology_labels: Mapping[str, str] | None = None,
    extra_quota: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    classes: Mapping[str, PriorityInfo] | None = None,
) -> ClusterState:
    """One cluster's state from its API objects (see the module docstring).
    ``extra_quota``: queue → ``guarantee``/``deserved``/``capability`` → more quota keys."""
    objs = list(objs)
    kinds = _by_kind(objs)
    pods = kinds.get("Pod", [])
    tiers, domains = _domains(
        kinds.get("Node", []), kinds.get(HYPERNODE_KIND, []), topology_labels or {}
    )
    products = gpu_products or {}
    nodes = _nodes(kinds.get("Node", []), pods, domains, products)
    queues: dict[str, Any] = {}
    for q in kinds.get(QUEUE_KIND, []):
        info = read_queue(q)
        extra = (extra_quota or {}).get(info.name, {})
        queues[info.name] = {
            "parent": None if info.name == "root" else info.parent,
            "weight": info.weight,
            "reclaimable": info.reclaimable,
            **{
                part: {**dict(extra.get(part, {})), **getattr(info, part)}
                for part in ("guarantee", "deserved", "capability")
            },
        }
    known = {**priority_classes(objs), **(classes or {})}
    gangs = _gangs(kinds.get(PODGROUP_KIND, []), pods, nodes, known)
    return ClusterState.model_validate(
        {
            "region": region,
            "gpu_products": dict(products),
            "tiers": tiers,
            "nodes": nodes,
            "queues": queues,
            "gangs": gangs,
        }
    )
