"""A cluster's ``provisioning:`` block: how Karpenter launches its GPU nodes — the provider's
node classes (AMI, IAM role, subnets and security groups by tag, disks), and per GPU model the
instance types, capacity types, node shape and the most GPUs it may launch — and the checks
that need the whole config: a pool's limit no lower than what the quotas grant on its model
plus the stated headroom.

Rendered by :mod:`gangway.render.karpenter`; ``docs/capacity.md`` says why each setting is
what it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gangway.errors import FieldError
from gangway.units import memory_bytes, millicores

__all__ = [
    "CAPACITY_TYPES",
    "PROVIDERS",
    "Disruption",
    "GpuPool",
    "NodeClass",
    "NodeShape",
    "Provisioning",
    "pool_gpus",
    "provisioning_problems",
    "required_gpus",
]

PROVIDERS = ("aws",)
"""Providers Gangway renders node classes for (Karpenter's EC2NodeClass)."""
CapacityType = Literal["reserved", "on-demand", "spot"]
CAPACITY_TYPES: tuple[CapacityType, ...] = ("reserved", "on-demand", "spot")
"""Karpenter's ``karpenter.sh/capacity-type`` values, most preferred first."""

_DURATION = r"^([0-9]+(s|m|h))+$"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_RESERVED_TAGS = ("eks:eks-cluster-name", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeClass(_Model):
    """The provider's settings for a GPU node (an EC2NodeClass)."""

    ami: str = "al2023@latest"
    """An AMI alias, ``al2023@VERSION``: Karpenter picks the alias's NVIDIA variant (driver and
    container toolkit installed) for GPU instance types."""
    role: str = Field(min_length=1)
    """The IAM role of the nodes (Karpenter makes the instance profile)."""
    subnet_tags: dict[str, str] = Field(min_length=1)
    """Subnets are those with all of these tags (``karpenter.sh/discovery: CLUSTER``)."""
    security_group_tags: dict[str, str] = Field(min_length=1)
    """Security groups are those with all of these tags."""
    root_volume: str = "200Gi"
    """The root EBS volume (gp3, encrypted): images and logs; data goes to the NVMe disks."""
    instance_store: Literal["raid0"] | None = "raid0"
    """``raid0``: the instance's NVMe disks as one RAID0 array for the kubelet and containers
    (emptyDir scratch, image layers); ``null`` leaves them unused."""
    capacity_reservation_ids: list[str] = Field(default_factory=list)
    """EC2 capacity reservations (``cr-…``) the ``reserved`` capacity type launches into."""
    tags: dict[str, str] = Field(default_factory=dict)
    """EC2 tags of the instances (cost allocation)."""

    @field_validator("ami")
    @classmethod
    def _alias(cls, v: str) -> str:
        family, _, version = v.partition("@")
        if family != "al2023" or not version:
            raise ValueError(
                f"{v!r}: give an Amazon Linux 2023 alias, al2023@latest or al2023@vYYYYMMDD "
                "(Karpenter launches its NVIDIA variant on GPU instance types)"
            )
        return v

    @field_validator("root_volume")
    @classmethod
    def _volume(cls, v: str) -> str:
        if not re.fullmatch(r"[1-9][0-9]{0,4}Gi", v) or int(v[:-2]) > 59000:
            raise ValueError(f"{v!r}: give a size in Gi, e.g. 200Gi (at most 59000Gi)")
        return v

    @field_validator("subnet_tags", "security_group_tags", "tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        empty = [k or "''" for k, value in v.items() if not k or not value]
        if empty:
            raise ValueError(f"tags need a key and a value: {', '.join(empty)}")
        return v

    @field_validator("tags")
    @classmethod
    def _own_tags(cls, v: dict[str, str]) -> dict[str, str]:
        taken = [k for k in v if k in _RESERVED_TAGS or k.startswith("kubernetes.io/cluster")]
        if taken:
            raise ValueError(f"{', '.join(taken)}: Karpenter or EKS sets these tags; remove them")
        return v

    @field_validator("capacity_reservation_ids")
    @classmethod
    def _reservations(cls, v: list[str]) -> list[str]:
        bad = [r for r in v if not re.fullmatch(r"cr-[0-9a-z]+", r)]
        if bad:
            raise ValueError(f"{', '.join(bad)}: a capacity reservation id is cr-…")
        return v


class NodeShape(_Model):
    """What one node of the pool has: the NodePool's CPU and memory limits follow from it."""

    gpus: int = Field(ge=1, le=64)
    cpu: str | int
    memory: str

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: str | int) -> str | int:
        millicores(v)
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        memory_bytes(v)
        return v


class GpuPool(_Model):
    """The nodes of one GPU model: a NodePool per capacity type."""

    node_class: str
    instance_types: list[str] = Field(default_factory=list)
    """EC2 instance types (``p5.48xlarge``) ..."""
    instance_families: list[str] = Field(default_factory=list)
    """... or families (``p5``): one of the two."""
    capacity_types: list[CapacityType] = Field(min_length=1)
    node: NodeShape
    max_gpus: int | None = Field(None, ge=1)
    """The most GPUs each of its NodePools may launch (default: the quotas on the model plus
    the headroom, rounded up to whole nodes)."""

    @model_validator(mode="after")
    def _one_selector(self) -> GpuPool:
        if bool(self.instance_types) == bool(self.instance_families):
            raise ValueError(
                "give instance_types (e.g. [p5.48xlarge]) or instance_families (e.g. [p5]), "
                "one of the two"
            )
        names = [*self.instance_types, *self.instance_families]
        bad = [n for n in names if not _LABEL_VALUE.fullmatch(n) or not n]
        if bad:
            raise ValueError(f"{', '.join(bad)}: not an EC2 instance type or family name")
        if len(set(self.capacity_types)) != len(self.capacity_types):
            raise ValueError("capacity_types: each at most once")
        return self


class Disruption(_Model):
    """When Karpenter may take a node away (the same for every GPU pool of the cluster)."""

    consolidate_after: str = Field("30m", pattern=_DURATION)
    """How long a GPU node stays empty before it is removed (the next gang may want it)."""
    expire_after: str = Field("720h", pattern=r"^(([0-9]+(s|m|h))+|Never)$")
    """A node's longest life; then it is drained (see ``termination_grace_period``)."""
    termination_grace_period: str = Field("24h", pattern=_DURATION)
    """How long a draining node waits for its do-not-disrupt pods before it deletes them."""
    budget: str = Field("1", pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$")
    """How many of a pool's nodes may be disrupted at once (a count or a percentage)."""


class Provisioning(_Model):
    """A cluster's GPU nodes, launched by Karpenter."""

    provider: str
    headroom_percent: int = Field(10, ge=0, le=1000)
    """How far above the quotas on a model its NodePools may go."""
    node_classes: dict[str, NodeClass] = Field(min_length=1)
    gpus: dict[str, GpuPool] = Field(min_length=1)
    """GPU type → its pools."""
    disruption: Disruption = Field(default_factory=Disruption)

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if v not in PROVIDERS:
            raise ValueError(
                f"{v!r}: Gangway renders Karpenter's node classes for {', '.join(PROVIDERS)} "
                "only (EC2NodeClass); provision this cluster's nodes another way and leave "
                "provisioning out"
            )
        return v


def required_gpus(granted: int, headroom_percent: int) -> int:
    """The fewest GPUs a pool may launch: what the quotas grant plus the headroom."""
    return math.ceil(Decimal(granted) * (100 + headroom_percent) / 100)


def pool_gpus(pool: GpuPool, granted: int, headroom_percent: int) -> int:
    """A pool's GPU limit: ``max_gpus``, else the required GPUs in whole nodes."""
    if pool.max_gpus is not None:
        return pool.max_gpus
    need = required_gpus(granted, headroom_percent)
    return max(1, math.ceil(need / pool.node.gpus)) * pool.node.gpus


def provisioning_problems(
    path: str, prov: Provisioning, products: Mapping[str, str], granted: Mapping[str, int]
) -> Iterator[FieldError]:
    """What is wrong with one cluster's ``prov`` (at ``path``) given its GPU products (type →
    label value) and the GPUs the quotas grant on each type."""
    for model, pool in prov.gpus.items():
        at = f"{path}.gpus.{model}"
        if not _NAME.fullmatch(model.lower()):
            yield FieldError(at, f"{model!r} cannot name a NodePool; use letters and digits")
        product = products.get(model, model)
        if not _LABEL_VALUE.fullmatch(product):
            yield FieldError(at, f"its product {product!r} is not a node label value")
        nc = prov.node_classes.get(pool.node_class)
        if nc is None:
            known = ", ".join(sorted(prov.node_classes))
            yield FieldError(f"{at}.node_class", f"no node class {pool.node_class!r} ({known})")
        elif "reserved" in pool.capacity_types and not nc.capacity_reservation_ids:
            yield FieldError(
                f"{at}.capacity_types",
                f"reserved: node class {pool.node_class!r} names no capacity_reservation_ids",
            )
        need = required_gpus(granted.get(model, 0), prov.headroom_percent)
        if pool.max_gpus is not None and pool.max_gpus < need:
            yield FieldError(
                f"{at}.max_gpus",
                f"{pool.max_gpus} is below what the quotas grant on {model} "
                f"({granted.get(model, 0)}) plus {prov.headroom_percent}% headroom ({need}): "
                f"raise it to {need} or more, or leave it out to follow the quotas",
            )
