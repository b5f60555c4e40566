"""A fleet to replay gangs on, built from a platform config: one cluster's GPUs (``gpus:``)
as whole nodes, grouped into its topology tiers (``topology.labels``, closest first — rack,
then block) by a layout, with the config's priority classes, teams and queues.

The layout says how many nodes make a domain of the first tier and how many of those make one
of the next (``8,4``: 8 nodes a rack, 4 racks a block); a tier beyond the layout holds the
whole model's nodes. Each GPU model gets nodes of its own: a domain never mixes models. A node
has :data:`NODE_GPUS` GPUs, :data:`CPU_PER_GPU` cores and :data:`MEMORY_PER_GPU_GI` GiB of
memory per GPU (an 8 × H100 server's proportions), so a gang pod asking the same per GPU fills
a node exactly. A cluster whose topology is written as explicit HyperNodes already names its
nodes, but not their models: take such a fleet from a snapshot instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gangway.config import PlatformConfig, load_config
from gangway.errors import PermanentError, chosen_cluster
from gangway.scheduling.snapshot.build import T0, from_config
from gangway.scheduling.snapshot.cluster_state import Snapshot

__all__ = [
    "CPU_PER_GPU",
    "EXAMPLE_FLEET",
    "MEMORY_PER_GPU_GI",
    "NODE_GPUS",
    "Fleet",
    "build_fleet",
    "parse_layout",
]

NODE_GPUS = 8
CPU_PER_GPU = 12
MEMORY_PER_GPU_GI = 128
EXAMPLE_FLEET = Path(__file__).with_name("example_fleet.yaml")
"""A platform config for the gang benchmark: one 1,024-H100 training cluster in racks and
blocks, two teams (``--fleet example``)."""


@dataclass(frozen=True)
class Fleet:
    snapshot: Snapshot
    cluster: str
    tiers: tuple[str, ...]
    layout: tuple[int, ...]
    gpus: dict[str, int]
    """GPU model → GPUs (whole nodes: the config's count rounded up to :data:`NODE_GPUS`)."""
    teams: tuple[str, ...]

    def describe(self) -> str:
        """``train: 1024 H100 in 128 nodes; 8 nodes a rack, 4 racks a block``."""
        models = ", ".join(f"{n} {m}" for m, n in self.gpus.items())
        nodes = sum(self.gpus.values()) // NODE_GPUS
        parts = [f"{self.layout[0]} nodes a {self.tiers[0]}"] if self.tiers else []
        parts += [
            f"{size} {self.tiers[i]}s a {self.tiers[i + 1]}"
            for i, size in enumerate(self.layout[1:])
            if i + 1 < len(self.tiers)
        ]
        return f"{self.cluster}: {models} in {nodes} nodes" + (
            f"; {', '.join(parts)}" if parts else ""
        )


def parse_layout(raw: str) -> tuple[int, ...]:
    """``8,4`` → (8, 4); a clear error naming ``--layout`` for anything else."""
    try:
        sizes = tuple(int(x) for x in raw.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(s < 1 for s in sizes):
        raise PermanentError(
            f"--layout {raw!r}: give whole numbers ≥ 1 separated by commas — nodes a domain of "
            "the first tier, then domains of each tier a domain of the next (8,4: 8 nodes a "
            "rack, 4 racks a block)"
        )
    return sizes


def _config(source: str) -> PlatformConfig:
    if not source.strip():
        raise PermanentError("--fleet: give a platform config file, or 'example'")
    path = EXAMPLE_FLEET if source == "example" else Path(source)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise PermanentError(f"--fleet {source}: {what} (a platform config, or 'example')")
    return load_config(path)


def build_fleet(source: str, cluster: str | None, layout: Sequence[int]) -> Fleet:
    """The fleet of ``cluster`` (the config's only one when None) in config ``source``
    (``example``: :data:`EXAMPLE_FLEET`), empty, its nodes laid out by ``layout``."""
    cfg = _config(source)
    cluster = chosen_cluster(cluster, cfg.clusters, "the config")
    spec = cfg.clusters[cluster]
    if spec.topology.hypernodes:
        raise PermanentError(
            f"cluster {cluster}: its topology is explicit HyperNodes, which name nodes but not "
            "their GPU models; give a cluster with topology.labels, or a snapshot of it"
        )
    if not spec.gpus:
        raise PermanentError(
            f"cluster {cluster}: the config gives it no GPUs (clusters.{cluster}.gpus)"
        )
    tiers = tuple(spec.topology.labels)
    b = from_config(cfg, T0)
    b.source = "generated"
    b.clusters = {cluster: b.clusters[cluster]}
    cb = b.clusters[cluster]
    gpus: dict[str, int] = {}
    for model, count in spec.gpus.items():
        nodes = -(-count // NODE_GPUS)
        gpus[model] = nodes * NODE_GPUS
        prefix = model.lower()
        for i in range(nodes):
            domains, index = {}, i
            for t, name in enumerate(tiers):
                index = index // layout[t] if t < len(layout) else 0
                domains[name] = f"{prefix}-{name}{index}"
            cb.node(
                f"{prefix}-{i:04d}",
                gpu_type=model,
                gpus=NODE_GPUS,
                cpu=CPU_PER_GPU * NODE_GPUS,
                memory_gi=MEMORY_PER_GPU_GI * NODE_GPUS,
                domains=domains,
            )
    teams = tuple(cfg.team_views())
    return Fleet(b.build(), cluster, tiers, tuple(layout), gpus, teams)
