"""The fleet the twin replays on (``gangway simulate --fleet CONFIG_OR_SNAPSHOT``): every
cluster of a platform config, or the nodes of a snapshot — empty of gangs, with the teams,
queues (guarantee, deserved, capability, reclaimable) and priority classes the decisions read.

From a config, each cluster with ``gpus:`` is built as :func:`~gangway.scheduling.simulation.
fleet.build_fleet` builds one (whole 8-GPU nodes in racks and blocks by a layout). From a
snapshot, the nodes are taken as they are and its gangs left out: what they held is given back,
so only what non-gang pods use stays allocated. ``example`` is :data:`EXAMPLE_TWIN_FLEET`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gangway.errors import PermanentError
from gangway.scheduling.simulation.fleet import build_fleet
from gangway.scheduling.snapshot import load_snapshot
from gangway.scheduling.snapshot.cluster_state import Amount, Snapshot
from gangway.user_yaml import read_mapping

__all__ = ["EXAMPLE_TWIN_FLEET", "TwinFleet", "empty_of_gangs", "twin_fleet"]

EXAMPLE_TWIN_FLEET = Path(__file__).with_name("example_twin_fleet.yaml")
"""Two clusters (us-east, eu-west) of H100 and A100 nodes in racks and blocks, three teams
with guarantees, deserved shares and capabilities, three priority classes
(``--fleet example``)."""


@dataclass(frozen=True)
class TwinFleet:
    snapshot: Snapshot
    source: str

    @property
    def gpus(self) -> dict[tuple[str, str], int]:
        """(cluster, GPU model) → allocatable GPUs."""
        out: dict[tuple[str, str], int] = {}
        for name, c in self.snapshot.clusters.items():
            for n in c.nodes:
                if n.gpu_type and n.schedulable:
                    key = (name, n.gpu_type)
                    out[key] = out.get(key, 0) + n.allocatable.gpus
        return out

    @property
    def teams(self) -> tuple[str, ...]:
        return tuple(self.snapshot.teams)

    def describe(self) -> str:
        """``us-east: 512 H100, 256 A100 in 96 nodes; eu-west: …``."""
        parts = []
        for name, c in self.snapshot.clusters.items():
            models = ", ".join(f"{n} {m}" for (cl, m), n in self.gpus.items() if cl == name)
            parts.append(f"{name} ({c.region}): {models or 'no GPUs'} in {len(c.nodes)} nodes")
        return "; ".join(parts)


def empty_of_gangs(snap: Snapshot) -> Snapshot:
    """``snap`` with its gangs left out and what the running ones held given back."""
    clusters = {}
    for name, c in snap.clusters.items():
        held: dict[str, list[int]] = {}
        for g in c.gangs:
            if g.phase != "Running":
                continue
            p = g.per_pod
            for node, k in g.placement.items():
                h = held.setdefault(node, [0, 0, 0])
                h[0], h[1], h[2] = h[0] + k * p.cpu, h[1] + k * p.memory, h[2] + k * p.gpus
        nodes = []
        for n in c.nodes:
            h = held.get(n.name, [0, 0, 0])
            a = n.allocated
            left = Amount(
                cpu=max(a.cpu - h[0], 0), memory=max(a.memory - h[1], 0), gpus=max(a.gpus - h[2], 0)
            )
            nodes.append(n.model_copy(update={"allocated": left}))
        clusters[name] = c.model_copy(update={"nodes": nodes, "gangs": []})
    return snap.model_copy(update={"clusters": clusters})


def twin_fleet(source: str, layout: Sequence[int] = (8, 4)) -> TwinFleet:
    """The fleet in ``source``: a platform config (every cluster with GPUs, laid out by
    ``layout``), a snapshot file, or ``example``."""
    if not source.strip():
        raise PermanentError("--fleet: give a platform config or a snapshot file, or 'example'")
    path = EXAMPLE_TWIN_FLEET if source == "example" else Path(source)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise PermanentError(f"--fleet {source}: {what} (a platform config or a snapshot)")
    raw = read_mapping(path, expected="clusters:, teams: (a config) or taken_at: (a snapshot)")
    if "taken_at" in raw:
        return TwinFleet(empty_of_gangs(load_snapshot(path)), source)
    clusters = raw.get("clusters")
    names = [
        n
        for n, c in (clusters if isinstance(clusters, dict) else {}).items()
        if isinstance(c, dict) and c.get("gpus")
    ]
    if not names:
        raise PermanentError(f"--fleet {source}: no cluster with gpus: to replay on")
    built = [build_fleet(str(path), n, layout).snapshot for n in names]
    merged = built[0].model_copy(
        update={"clusters": {n: s.clusters[n] for n, s in zip(names, built, strict=True)}}
    )
    return TwinFleet(merged, source)
