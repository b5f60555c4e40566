"""What the clusters look like at one moment, as typed data: nodes (GPU type, allocatable and
allocated, topology domains), queues (guarantee/deserved/capability) and the gangs in them
(running, with the nodes they hold, or pending), plus the teams and priority classes of the
platform config. Admission, preemption and placement read only this.

Amounts are whole numbers: CPU in millicores, memory in bytes, GPUs in devices; the file may
write Kubernetes quantities (``500m``, ``64Gi``) and they are read as such. A quota's keys are
``cpu``, ``memory``, ``gpu`` (every type) and ``gpu/TYPE`` (one type).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
)

from gangway.units import MAX_AMOUNT, memory_bytes, millicores, quota_key

__all__ = [
    "Amount",
    "ClusterState",
    "Gang",
    "Millicores",
    "Node",
    "PriorityInfo",
    "QueueState",
    "QuotaAmounts",
    "Snapshot",
    "TeamInfo",
    "requested",
]


def _aware(v: datetime) -> datetime:
    """A time without a zone is UTC (as Kubernetes writes them)."""
    return v if v.tzinfo is not None else v.replace(tzinfo=UTC)


Time = Annotated[datetime, AfterValidator(_aware)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_AMOUNT)]
"""A whole number of devices or pods (``true`` is not one)."""


Millicores = Annotated[
    int, BeforeValidator(millicores), PlainSerializer(lambda v: f"{v}m", return_type=str)
]
Bytes = Annotated[int, BeforeValidator(memory_bytes)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Amount(_Model):
    """CPU, memory and GPUs (of a node, or of one pod)."""

    cpu: Millicores = Field(0, ge=0)
    memory: Bytes = Field(0, ge=0)
    gpus: Count = 0


def requested(per_pod: Amount, pods: int, gpu_type: str | None, key: str) -> int:
    """What ``pods`` pods of ``per_pod`` (GPUs of ``gpu_type``) request of quota ``key``."""
    if key == "gpu":
        return per_pod.gpus * pods
    if key == "cpu":
        return per_pod.cpu * pods
    if key == "memory":
        return per_pod.memory * pods
    return per_pod.gpus * pods if gpu_type and key == quota_key(gpu_type) else 0


class Node(_Model):
    name: str
    gpu_type: str | None = Field(None, min_length=1)
    """The GPU model (the config's name for it, e.g. ``H100``); None for a CPU node."""
    allocatable: Amount
    allocated: Amount = Amount()
    """What every pod on the node requests, gangs and everything else."""
    domains: dict[str, str] = Field(default_factory=dict)
    """Topology tier → the domain the node is in, e.g. ``{rack: r1, block: b1}``."""
    schedulable: bool = True


class Gang(_Model):
    """A Volcano Job's gang: all its pods run or none do."""

    name: str
    namespace: str = "default"
    queue: str
    priority_class: str | None = None
    priority: int = Field(0, strict=True)
    pods: int = Field(ge=1, le=1_000_000)
    per_pod: Amount
    gpu_type: str | None = Field(None, min_length=1)
    phase: Literal["Running", "Pending"] = "Pending"
    placement: dict[str, Annotated[int, Field(strict=True, ge=1, le=1_000_000)]] = Field(
        default_factory=dict
    )
    """Node → how many of its pods run there (a running gang)."""
    workflow: str | None = None
    created_at: Time | None = None
    """When its PodGroup was created (how long a pending gang has waited)."""
    started_at: Time | None = None
    last_checkpoint_at: Time | None = None
    """When it last saved a checkpoint (from lineage), for what evicting it would lose."""

    @property
    def key(self) -> str:
        """``NAMESPACE/NAME``: gangs are PodGroups, named per namespace."""
        return f"{self.namespace}/{self.name}"

    def total(self, key: str) -> int:
        """The gang's whole request of quota ``key``."""
        return requested(self.per_pod, self.pods, self.gpu_type, key)


def _quota(v: object) -> dict[str, int]:
    if not isinstance(v, dict):
        raise ValueError("expected a mapping of cpu, memory, gpu and gpu/TYPE to amounts")
    out: dict[str, int] = {}
    for key, amount in v.items():
        if key in ("cpu", "memory"):
            out[key] = millicores(amount) if key == "cpu" else memory_bytes(amount)
            if out[key] < 0:
                raise ValueError(f"{key}: {amount!r} is negative")
        elif key == "gpu" or (isinstance(key, str) and key.startswith("gpu/") and key[4:]):
            if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
                raise ValueError(f"{key}: {amount!r} is not a whole number of GPUs")
            if amount > MAX_AMOUNT:
                raise ValueError(f"{key}: {amount} is larger than any real amount")
            out[key] = amount
        else:
            raise ValueError(f"unknown resource {key!r}: use cpu, memory, gpu or gpu/TYPE")
    return out


def _quota_out(v: dict[str, int]) -> dict[str, str | int]:
    return {k: f"{n}m" if k == "cpu" else n for k, n in v.items()}


QuotaAmounts = Annotated[dict[str, int], BeforeValidator(_quota), PlainSerializer(_quota_out)]
"""Amounts by quota key; CPU in millicores (written back as ``NNNm``)."""


class QueueState(_Model):
    """A Volcano queue of one cluster: its place in the hierarchy and its quota."""

    parent: str | None = "root"
    weight: int = Field(1, ge=1)
    reclaimable: bool = True
    guarantee: QuotaAmounts = Field(default_factory=dict)
    deserved: QuotaAmounts = Field(default_factory=dict)
    capability: QuotaAmounts = Field(default_factory=dict)
    """Absent keys: no limit."""


class ClusterState(_Model):
    region: str
    gpu_products: dict[str, str] = Field(default_factory=dict)
    """GPU model → its ``nvidia.com/gpu.product`` node label value (default: the model)."""
    tiers: list[str] = Field(default_factory=list)
    """Topology tiers, closest first (tier 1 = the first), as in ``Node.domains``."""
    nodes: list[Node] = Field(default_factory=list)
    queues: dict[str, QueueState] = Field(default_factory=dict)
    gangs: list[Gang] = Field(default_factory=list)

    def usage(self, queue: str, key: str) -> int:
        """What the running gangs of ``queue`` and of its descendants hold of ``key``."""
        inside = self.subtree(queue)
        return sum(g.total(key) for g in self.gangs if g.phase == "Running" and g.queue in inside)

    def subtree(self, queue: str) -> set[str]:
        """``queue`` and every queue below it."""
        out = {queue}
        grew = True
        while grew:
            more = {n for n, q in self.queues.items() if q.parent in out} - out
            out |= more
            grew = bool(more)
        return out

    def ancestors(self, queue: str) -> list[str]:
        """``queue`` then its parents up to (not including) ``root``."""
        out: list[str] = []
        q: str | None = queue
        while q and q != "root" and q in self.queues and q not in out:
            out.append(q)
            q = self.queues[q].parent
        return out


class TeamInfo(_Model):
    queue: str
    priority_classes: list[str] = Field(min_length=1)
    """Allowed, the team's default first."""
    gpu_types: list[str] | None = None
    """GPU types its quota names (None: any)."""


class PriorityInfo(_Model):
    value: int
    preempting: bool = True
    """False: ``preemptionPolicy: Never`` — its gangs wait rather than evict others."""


class Snapshot(_Model):
    taken_at: Time
    source: Literal["live", "file", "example", "recorded", "generated"] = "file"
    priority_classes: dict[str, PriorityInfo] = Field(default_factory=dict)
    default_priority_class: str | None = None
    teams: dict[str, TeamInfo] = Field(default_factory=dict)
    clusters: dict[str, ClusterState] = Field(min_length=1)
