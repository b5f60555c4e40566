"""Building a snapshot in code: for tests, benchmarks, the shipped example, and the platform
config's side of a live snapshot (teams, priority classes, queues).

    snap = (
        SnapshotBuilder()
        .priority("high", 1000).priority("low", 10)
        .team("research", classes=["high", "low"])
        .cluster("us-east", region="us-east-1")
        .racks(2, per_rack=4, gpu_type="H100")
        .queue("research", deserved={"gpu": 32})
        .running("sweep-1", queue="research", pods=2, gpus=8, priority_class="low")
        .done()
        .build()
    )
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Required, TypedDict, Unpack

from gangway.config.schema import PlatformConfig
from gangway.scheduling.snapshot.cluster_state import Amount, ClusterState, Gang, Node, Snapshot

__all__ = ["ClusterBuilder", "GangShape", "SnapshotBuilder", "from_config"]

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class GangShape(TypedDict, total=False):
    """What a built gang is: its queue and pod count, and per pod ``gpus`` (8) of
    ``gpu_type`` (H100), ``cpu`` cores (8) and 64Gi; its ``priority_class``."""

    queue: Required[str]
    pods: Required[int]
    gpus: int
    gpu_type: str | None
    priority_class: str | None
    cpu: int


def _per_pod(shape: GangShape) -> list[int]:
    return [shape.get("cpu", 8) * 1000, 64 * 2**30, shape.get("gpus", 8)]


@dataclass
class _Node:
    name: str
    gpu_type: str | None
    allocatable: list[int]
    used: list[int]
    domains: dict[str, str]


@dataclass
class ClusterBuilder:
    parent: SnapshotBuilder
    name: str
    region: str
    tiers: list[str]
    gpu_products: dict[str, str] = field(default_factory=dict)
    nodes: list[_Node] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    gangs: list[Gang] = field(default_factory=list)
    rack_count: dict[str, int] = field(default_factory=dict)

    def node(
        self,
        name: str,
        *,
        gpu_type: str | None = "H100",
        gpus: int = 8,
        cpu: int = 96,
        memory_gi: int = 1024,
        domains: Mapping[str, str] | None = None,
    ) -> ClusterBuilder:
        alloc = [cpu * 1000, memory_gi * 2**30, gpus if gpu_type else 0]
        self.nodes.append(_Node(name, gpu_type, alloc, [0, 0, 0], dict(domains or {})))
        return self

    def racks(
        self,
        racks: int,
        *,
        per_rack: int,
        gpu_type: str | None = "H100",
        gpus: int = 8,
        racks_per_block: int = 2,
        prefix: str | None = None,
    ) -> ClusterBuilder:
        """``racks`` racks of ``per_rack`` nodes, ``racks_per_block`` racks a block (as far as
        the cluster's tiers go)."""
        p = prefix or f"{self.name}-{(gpu_type or 'cpu').lower()}"
        first = self.rack_count.get(p, 0)
        self.rack_count[p] = first + racks
        for r in range(first, first + racks):
            names = {"rack": f"{p}-r{r}", "block": f"{p}-b{r // racks_per_block}"}
            doms = {t: names[t] for t in self.tiers if t in names}
            for i in range(per_rack):
                self.node(f"{p}-{r * per_rack + i:03d}", gpu_type=gpu_type, gpus=gpus, domains=doms)
        return self

    def queue(
        self,
        name: str,
        *,
        parent: str = "root",
        weight: int = 1,
        reclaimable: bool = True,
        guarantee: Mapping[str, Any] | None = None,
        deserved: Mapping[str, Any] | None = None,
        capability: Mapping[str, Any] | None = None,
    ) -> ClusterBuilder:
        self.queues[name] = {
            "parent": parent,
            "weight": weight,
            "reclaimable": reclaimable,
            "guarantee": dict(guarantee or {}),
            "deserved": dict(deserved or {}),
            "capability": dict(capability or {}),
        }
        return self

    def running(
        self,
        name: str,
        *,
        nodes: list[str] | None = None,
        hours: float = 2.0,
        checkpoint_hours_ago: float | None = None,
        **shape: Unpack[GangShape],
    ) -> ClusterBuilder:
        """A running gang of ``pods`` pods, on ``nodes`` (one pod each, in order) or packed
        onto the first nodes of its model with room; ``hours`` since it started."""
        per = _per_pod(shape)
        gpu_type = shape.get("gpu_type", "H100")
        chosen = nodes or self._pack(shape["pods"], per, gpu_type)
        placement: dict[str, int] = {}
        by_name = {n.name: n for n in self.nodes}
        for n in chosen:
            placement[n] = placement.get(n, 0) + 1
            by_name[n].used = [u + p for u, p in zip(by_name[n].used, per, strict=True)]
        t0 = self.parent.taken_at
        ckpt = checkpoint_hours_ago
        times = {
            "started_at": t0 - timedelta(hours=hours),
            "last_checkpoint_at": None if ckpt is None else t0 - timedelta(hours=ckpt),
        }
        gang = self._gang(name, shape, "Running", placement)
        self.gangs.append(gang.model_copy(update=times))
        return self

    def pending(
        self, name: str, *, hours: float | None = None, **shape: Unpack[GangShape]
    ) -> ClusterBuilder:
        """A gang waiting for room (``hours``: since its PodGroup was created)."""
        gang = self._gang(name, shape, "Pending", {})
        if hours is not None:
            gang = gang.model_copy(
                update={"created_at": self.parent.taken_at - timedelta(hours=hours)}
            )
        self.gangs.append(gang)
        return self

    def _gang(self, name: str, shape: GangShape, phase: str, placement: dict[str, int]) -> Gang:
        per = _per_pod(shape)
        cls = shape.get("priority_class")
        value = self.parent.classes.get(cls, {}).get("value", 0) if cls else 0
        return Gang.model_validate(
            {
                "name": name,
                "queue": shape["queue"],
                "pods": shape["pods"],
                "per_pod": {"cpu": f"{per[0]}m", "memory": per[1], "gpus": per[2]},
                "gpu_type": shape.get("gpu_type", "H100") if per[2] else None,
                "priority_class": cls,
                "priority": value,
                "phase": phase,
                "placement": placement,
            }
        )

    def _pack(self, pods: int, per: list[int], gpu_type: str | None) -> list[str]:
        out: list[str] = []
        for n in self.nodes:
            if per[2] and n.gpu_type != gpu_type:
                continue
            used = list(n.used)
            while len(out) < pods and all(
                u + p <= a for u, p, a in zip(used, per, n.allocatable, strict=True)
            ):
                out.append(n.name)
                used = [u + p for u, p in zip(used, per, strict=True)]
        if len(out) < pods:
            raise ValueError(f"no room for {pods} pods of {per} in {self.name}")
        return out

    def done(self) -> SnapshotBuilder:
        return self.parent

    def state(self) -> ClusterState:
        nodes = [
            Node(
                name=n.name,
                gpu_type=n.gpu_type,
                allocatable=_amount(n.allocatable),
                allocated=_amount(n.used),
                domains=n.domains,
            )
            for n in self.nodes
        ]
        return ClusterState.model_validate(
            {
                "region": self.region,
                "gpu_products": self.gpu_products,
                "tiers": self.tiers,
                "nodes": nodes,
                "queues": self.queues,
                "gangs": self.gangs,
            }
        )


def _amount(v: list[int]) -> Amount:
    return Amount.model_validate({"cpu": f"{v[0]}m", "memory": v[1], "gpus": v[2]})


@dataclass
class SnapshotBuilder:
    taken_at: datetime = T0
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    teams: dict[str, dict[str, Any]] = field(default_factory=dict)
    clusters: dict[str, ClusterBuilder] = field(default_factory=dict)
    default_class: str | None = None
    source: str = "generated"

    def priority(self, name: str, value: int, *, preempting: bool = True) -> SnapshotBuilder:
        self.classes[name] = {"value": value, "preempting": preempting}
        self.default_class = self.default_class or name
        return self

    def team(
        self,
        name: str,
        *,
        queue: str | None = None,
        classes: list[str] | None = None,
        gpu_types: list[str] | None = None,
    ) -> SnapshotBuilder:
        self.teams[name] = {
            "queue": queue or name,
            "priority_classes": classes or list(self.classes)[:1],
            "gpu_types": gpu_types,
        }
        return self

    def cluster(
        self, name: str, *, region: str = "us-east-1", tiers: tuple[str, ...] = ("rack", "block")
    ) -> ClusterBuilder:
        self.clusters[name] = ClusterBuilder(self, name, region, list(tiers))
        return self.clusters[name]

    def build(self) -> Snapshot:
        return Snapshot.model_validate(
            {
                "taken_at": self.taken_at,
                "source": self.source,
                "priority_classes": self.classes,
                "default_priority_class": self.default_class,
                "teams": self.teams,
                "clusters": {n: c.state() for n, c in self.clusters.items()},
            }
        )


def from_config(cfg: PlatformConfig, taken_at: datetime | None = None) -> SnapshotBuilder:
    """A builder holding the config's priority classes, teams, and each cluster with its
    queues (no nodes or gangs yet: those come from the cluster)."""
    b = SnapshotBuilder(taken_at=taken_at or datetime.now(UTC), source="live")
    for name, pc in cfg.priority_classes.items():
        b.priority(name, pc.value, preempting=pc.preemptible)
    b.default_class = cfg.default_priority_class
    for name, view in cfg.team_views().items():
        gpu_types = sorted(view.quota.capability.gpu) if view.quota.capability else None
        b.team(name, queue=view.queue, classes=view.priority_classes, gpu_types=gpu_types)
    for cname, c in cfg.clusters.items():
        tiers = tuple(c.topology.labels) or _hypernode_tiers(c.topology.hypernodes)
        cb = b.cluster(cname, region=c.region, tiers=tiers)
        cb.gpu_products = dict(c.gpu_products)
        for oname, org in cfg.orgs.items():
            cb.queue(cfg.org_queue(oname), **_quota_args(org))
        for view in cfg.team_views().values():
            cb.queue(view.queue, parent=view.parent_queue, **_quota_args(view.quota))
    return b


def _quota_args(q: Any) -> dict[str, Any]:
    return {
        "weight": q.weight,
        "reclaimable": q.reclaimable,
        "guarantee": q.guarantee.quota(),
        "deserved": q.deserved.quota(),
        "capability": (q.capability.quota() if q.capability else {}),
    }


def _hypernode_tiers(hypernodes: Mapping[str, Any]) -> tuple[str, ...]:
    top = max((h.tier for h in hypernodes.values()), default=0)
    return tuple(f"tier{i}" for i in range(1, top + 1))
