"""What-if changes for the fleet twin (``gangway simulate --fleet … --what-if CHANGE``): each
is a full replay of the same workload (same seed) on a changed fleet or with changed gangs,
reported beside the unchanged one.

* ``add-nodes=WHERE:MODEL:N`` — N more nodes of GPU model MODEL in the cluster WHERE (its name
  or its region), each like the cluster's existing nodes of that model (or 8 GPUs, 12 cores and
  128 GiB a GPU), in new topology domains the size of the cluster's largest ones (the teams'
  quotas are kept: a model no quota names stays unused);
* ``deserved=TEAM:±P%[,TEAM:±P%…]`` — each named team's queue's deserved share (every resource
  it sets, in every cluster) scaled by 1 ± P % (rounded down; guarantee and capability kept);
* ``checkpoint-every=DURATION`` — every gang saves a checkpoint this often (``30m``, ``2h``,
  ``1d``, seconds; ``0``: never), what a preempted gang keeps.

Every mistake is one message naming the option and what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gangway.errors import PermanentError, closest
from gangway.scheduling.simulation.fleet import CPU_PER_GPU, MEMORY_PER_GPU_GI, NODE_GPUS
from gangway.scheduling.simulation.twin import TwinSettings, first_fit_decision
from gangway.scheduling.simulation.twin_fleet import TwinFleet
from gangway.scheduling.simulation.twin_workload import TwinGang
from gangway.scheduling.snapshot.cluster_state import Amount, ClusterState, Node

__all__ = ["WHAT_IFS", "Replay", "WhatIf", "parse_duration", "parse_what_if", "replays"]

WHAT_IFS = ("add-nodes", "deserved", "checkpoint-every")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class WhatIf:
    """One change, as given (``label``), and what it does."""

    label: str
    kind: str
    where: str = ""
    model: str = ""
    count: int = 0
    factors: tuple[tuple[str, float], ...] = ()
    """(team, 1 ± P %) for ``deserved``."""
    every_s: int = 0

    def fleet(self, fleet: TwinFleet) -> TwinFleet:
        """``fleet`` with this change (itself when the change is to the gangs)."""
        if self.kind == "add-nodes":
            return _add_nodes(fleet, self.where, self.model, self.count, self.label)
        if self.kind == "deserved":
            return _scale_deserved(fleet, dict(self.factors))
        return fleet

    def gangs(self, gangs: Sequence[TwinGang]) -> list[TwinGang]:
        """``gangs`` with this change (the same ones when the change is to the fleet)."""
        if self.kind == "checkpoint-every":
            return [replace(g, checkpoint_s=self.every_s) for g in gangs]
        return list(gangs)


def parse_duration(raw: str, option: str) -> int:
    """``30m`` / ``2h`` / ``1d`` / ``90s`` / ``90`` → seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", raw)
    if not m:
        raise PermanentError(f"{option} {raw!r}: give a duration such as 30m, 2h, 1d or 0")
    return int(m.group(1)) * _UNITS[m.group(2) or "s"]


def _cluster(fleet: TwinFleet, where: str, label: str) -> str:
    clusters = fleet.snapshot.clusters
    if where in clusters:
        return where
    by_region = [n for n, c in clusters.items() if c.region == where]
    if len(by_region) == 1:
        return by_region[0]
    known = sorted({*clusters, *(c.region for c in clusters.values())})
    near = closest(where, known)
    hint = f"; did you mean {near!r}?" if near else ""
    raise PermanentError(
        f"--what-if {label}: no cluster or region {where!r} ({', '.join(known)}){hint}"
    )


def parse_what_if(raw: str, fleet: TwinFleet) -> WhatIf:
    """One ``--what-if`` (see the module docstring), checked against ``fleet``."""
    kind, sep, value = raw.partition("=")
    kind = kind.strip()
    if not sep or kind not in WHAT_IFS:
        near = closest(kind, list(WHAT_IFS))
        hint = f" (did you mean {near}?)" if near else ""
        raise PermanentError(
            f"--what-if {raw!r}: give add-nodes=WHERE:MODEL:N, deserved=TEAM:±P%[,…] or "
            f"checkpoint-every=DURATION{hint}"
        )
    if kind == "checkpoint-every":
        return WhatIf(raw, kind, every_s=parse_duration(value, f"--what-if {kind}="))
    if kind == "add-nodes":
        parts = value.split(":")
        if len(parts) != 3 or not parts[2].strip().isdigit() or int(parts[2]) < 1:
            raise PermanentError(
                f"--what-if {raw!r}: give add-nodes=WHERE:MODEL:N (eu-west:H100:16), N ≥ 1"
            )
        cluster = _cluster(fleet, parts[0].strip(), raw)
        model = parts[1].strip()
        return WhatIf(raw, kind, where=cluster, model=model, count=int(parts[2]))
    factors = []
    for item in value.split(","):
        m = re.fullmatch(r"\s*([^:]+):\s*([+-]\d+(?:\.\d+)?)\s*%\s*", item)
        if not m:
            raise PermanentError(
                f"--what-if {raw!r}: give deserved=TEAM:±P% for each team (team-a:-10%)"
            )
        team = m.group(1).strip()
        if team not in fleet.snapshot.teams:
            near = closest(team, list(fleet.snapshot.teams))
            hint = f"; did you mean {near!r}?" if near else ""
            raise PermanentError(f"--what-if {raw!r}: no team {team!r} in the fleet{hint}")
        factor = 1 + float(m.group(2)) / 100
        if factor < 0:
            raise PermanentError(f"--what-if {raw!r}: a share cannot go below 0 (−100 % at most)")
        factors.append((team, factor))
    return WhatIf(raw, kind, factors=tuple(factors))


def _template(c: ClusterState, model: str) -> Node:
    like = next((n for n in c.nodes if n.gpu_type == model), None)
    if like is not None:
        return like.model_copy(update={"allocated": Amount()})
    per = {
        "cpu": CPU_PER_GPU * NODE_GPUS,
        "memory": MEMORY_PER_GPU_GI * NODE_GPUS * 2**30,
        "gpus": NODE_GPUS,
    }
    return Node(name="", gpu_type=model, allocatable=Amount.model_validate(per))


def _add_nodes(fleet: TwinFleet, cluster: str, model: str, count: int, label: str) -> TwinFleet:
    c = fleet.snapshot.clusters[cluster]
    like = _template(c, model)
    sizes = []  # nodes in the largest domain of each tier, so new domains are as large
    for tier in c.tiers:
        per: dict[str, int] = {}
        for n in c.nodes:
            per[n.domains.get(tier, "")] = per.get(n.domains.get(tier, ""), 0) + 1
        sizes.append(max(per.values(), default=count))
    prefix = f"{model.lower()}-whatif"
    added = [
        like.model_copy(
            update={
                "name": f"{prefix}-{i:04d}",
                "domains": {
                    t: f"{prefix}-{t}{i // size}" for t, size in zip(c.tiers, sizes, strict=True)
                },
            }
        )
        for i in range(count)
    ]
    state = c.model_copy(update={"nodes": [*c.nodes, *added]})
    clusters = {**fleet.snapshot.clusters, cluster: state}
    return TwinFleet(fleet.snapshot.model_copy(update={"clusters": clusters}), label)


def _scale_deserved(fleet: TwinFleet, factors: dict[str, float]) -> TwinFleet:
    snap = fleet.snapshot
    queues = {snap.teams[t].queue: f for t, f in factors.items()}
    clusters = {}
    for name, c in snap.clusters.items():
        changed = {
            q: s.model_copy(
                update={"deserved": {k: int(v * queues[q]) for k, v in s.deserved.items()}}
            )
            if q in queues
            else s
            for q, s in c.queues.items()
        }
        clusters[name] = c.model_copy(update={"queues": changed})
    return TwinFleet(snap.model_copy(update={"clusters": clusters}), fleet.source)


Replay = tuple[TwinFleet, list[TwinGang], TwinSettings]
"""One replay to run: its fleet, its gangs, its settings (its name among them)."""


def replays(
    fleet: TwinFleet, gangs: Sequence[TwinGang], base: TwinSettings, what_ifs: Sequence[WhatIf]
) -> list[Replay]:
    """The twin (``base``), its two baselines — the same workload without preemption, and FIFO
    order with first fit and no preemption — then one replay per what-if, in that order."""
    same = list(gangs)
    out: list[Replay] = [
        (fleet, same, base),
        (fleet, same, replace(base, name="no preemption", preemption=False)),
        (
            fleet,
            same,
            replace(
                base,
                name="FIFO + first fit",
                order="fifo",
                decide=first_fit_decision,
                preemption=False,
            ),
        ),
    ]
    for w in what_ifs:
        out.append((w.fleet(fleet), w.gangs(same), replace(base, name=w.label)))
    return out
