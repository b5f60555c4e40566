"""A cluster's GPU nodes as Karpenter objects, from its ``provisioning:`` block
(:mod:`gangway.config.provisioning`): an ``EC2NodeClass`` per node class and a ``NodePool``
per GPU model × capacity type.

Each NodePool launches only nodes Gangway's GPU pods can use and only those pods use: nodes
of the model's instance types, labelled with the GPU product the pods select
(:data:`~gangway.units.GPU_PRODUCT_LABEL`) and tainted with the GPU taint they tolerate
(:data:`~gangway.units.GPU_TAINT`). Its GPU limit is no lower than what the quotas grant on
the model plus the headroom; it consolidates a node only when it is empty, and a gang's pods
carry :data:`~gangway.units.DO_NOT_DISRUPT` besides (``docs/capacity.md``).
"""

from __future__ import annotations

from typing import Any

from gangway.config import PlatformConfig
from gangway.config.provisioning import CAPACITY_TYPES, GpuPool, NodeClass, Provisioning, pool_gpus
from gangway.units import GPU_PRODUCT_LABEL, GPU_RESOURCE, GPU_TAINT, memory_bytes, millicores

__all__ = [
    "CAPACITY_TYPE_LABEL",
    "INSTANCE_FAMILY_LABEL",
    "INSTANCE_TYPE_LABEL",
    "NODECLASS_API",
    "NODEPOOL_API",
    "WEIGHTS",
    "karpenter_objects",
    "nodeclass_name",
    "nodepool_name",
]

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
NODECLASS_API = f"{NODECLASS_GROUP}/v1"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_FAMILY_LABEL = "karpenter.k8s.aws/instance-family"
MODEL_LABEL = "gangway.dev/gpu-model"
"""The config's name for the node's GPU model (the product label carries the vendor's)."""
WEIGHTS = {"reserved": 30, "on-demand": 20, "spot": 10}
"""Karpenter tries the heaviest NodePool a pod fits first: capacity already paid for, then
on-demand, then spot (cheaper, but interrupted at two minutes' notice) when the others cannot
launch."""
ROOT_DEVICE = "/dev/xvda"
"""Amazon Linux 2023's root device."""


def nodeclass_name(node_class: str) -> str:
    return f"gangway-{node_class}"


def nodepool_name(model: str, capacity_type: str) -> str:
    return f"gangway-{model.lower()}-{capacity_type}"


def karpenter_objects(cfg: PlatformConfig, cluster: str) -> list[dict[str, Any]]:
    """The cluster's EC2NodeClasses and NodePools (none without a ``provisioning`` block)."""
    c = cfg.clusters[cluster]
    prov = c.provisioning
    if prov is None:
        return []
    granted = cfg.granted_gpus()
    classes = [_nodeclass(name, nc) for name, nc in sorted(prov.node_classes.items())]
    pools = [
        _nodepool(model, ct, pool, prov, c.gpu_products.get(model, model), granted.get(model, 0))
        for model, pool in sorted(prov.gpus.items())
        for ct in CAPACITY_TYPES
        if ct in pool.capacity_types
    ]
    return [*classes, *pools]


def _nodeclass(name: str, nc: NodeClass) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "role": nc.role,
        "amiSelectorTerms": [{"alias": nc.ami}],
        "subnetSelectorTerms": [{"tags": dict(nc.subnet_tags)}],
        "securityGroupSelectorTerms": [{"tags": dict(nc.security_group_tags)}],
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": nc.root_volume,
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
    }
    if nc.instance_store:
        spec["instanceStorePolicy"] = nc.instance_store.upper()
    if nc.capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": r} for r in nc.capacity_reservation_ids]
    if nc.tags:
        spec["tags"] = dict(nc.tags)
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": nodeclass_name(name)},
        "spec": spec,
    }


def _nodepool(
    model: str,
    capacity_type: str,
    pool: GpuPool,
    prov: Provisioning,
    product: str,
    granted: int,
) -> dict[str, Any]:
    gpus = pool_gpus(pool, granted, prov.headroom_percent)
    nodes = -(-gpus // pool.node.gpus)
    instances = (
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(pool.instance_types)}
        if pool.instance_types
        else {
            "key": INSTANCE_FAMILY_LABEL,
            "operator": "In",
            "values": list(pool.instance_families),
        }
    )
    d = prov.disruption
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": nodepool_name(model, capacity_type), "labels": {MODEL_LABEL: model}},
        "spec": {
            "weight": WEIGHTS[capacity_type],
            "limits": {
                GPU_RESOURCE: str(gpus),
                "cpu": _cores(nodes * millicores(pool.node.cpu)),
                "memory": _gibibytes(nodes * memory_bytes(pool.node.memory)),
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": d.consolidate_after,
                "budgets": [{"nodes": d.budget}],
            },
            "template": {
                "metadata": {"labels": {GPU_PRODUCT_LABEL: product, MODEL_LABEL: model}},
                "spec": {
                    "nodeClassRef": {
                        "group": NODECLASS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": nodeclass_name(pool.node_class),
                    },
                    "requirements": [
                        {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": [product]},
                        instances,
                        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type]},
                    ],
                    "taints": [{"key": GPU_TAINT, "effect": "NoSchedule"}],
                    "expireAfter": d.expire_after,
                    "terminationGracePeriod": d.termination_grace_period,
                },
            },
        },
    }


def _cores(m: int) -> str:
    return str(m // 1000) if m % 1000 == 0 else f"{m}m"


def _gibibytes(n: int) -> str:
    return f"{n // 2**30}Gi" if n % 2**30 == 0 else str(n)
