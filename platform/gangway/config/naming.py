"""Names in the platform config that become Kubernetes objects — teams, orgs, queues,
namespaces, clusters, priority classes, HyperNodes — and the topology they form: checked
before anything is rendered, each problem with its field path."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gangway.config.schema import PlatformConfig, Topology
from gangway.errors import FieldError

__all__ = ["RESERVED_NAMESPACES", "name_problems", "topology_problems"]

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RESERVED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "volcano-system"}
)
"""Namespaces a team may not take (besides Argo's and MLflow's): the policies and Pod
Security labels of a team namespace would stop what runs there."""


def _bad_name(name: str, limit: int = 63) -> str | None:
    if len(name) > limit:
        return f"{name!r} is longer than {limit} characters"
    if not _LABEL.match(name):
        return (
            f"{name!r} is not a Kubernetes name: lowercase letters, digits and '-', starting "
            "and ending with a letter or digit"
        )
    return None


def name_problems(cfg: PlatformConfig) -> Iterator[FieldError]:
    """Every name is a valid Kubernetes name; each team is defined once; team namespaces stay
    clear of the system's, Argo's and MLflow's."""
    named = [
        *((f"orgs.{o}", o, 63) for o in cfg.orgs),
        *((f"clusters.{c}", c, 63) for c in cfg.clusters),
        *((f"priority_classes.{p}", p, 253) for p in cfg.priority_classes),
        *((path, t, 58) for path, _, t, _ in cfg.team_entries()),  # 58: "team-" + name fits 63
    ]
    for path, name, limit in named:
        problem = _bad_name(name, limit)
        if problem:
            yield FieldError(path, problem)
    for p in cfg.priority_classes:
        if p.startswith("system-"):
            yield FieldError(
                f"priority_classes.{p}", "the 'system-' prefix is reserved by Kubernetes"
            )
    yield from _duplicate_teams(cfg)
    taken = RESERVED_NAMESPACES | {c.namespace for c in cfg.clusters.values()}
    taken |= {cfg.mlflow.service[1]}
    for view in cfg.team_views().values():
        if view.namespace in taken:
            yield (
                FieldError(
                    f"team {view.name}",
                    f"namespace {view.namespace!r} belongs to the system, Argo or "
                    "MLflow; give the team its own",
                )
            )
    for path, org in ((f"orgs.{o}", org) for o, org in cfg.orgs.items()):
        if not org.teams:
            yield FieldError(
                f"{path}.teams", "an org needs at least one team (its queue has no other use)"
            )


def _duplicate_teams(cfg: PlatformConfig) -> Iterator[FieldError]:
    seen: dict[str, str] = {}
    for path, _, team, _ in cfg.team_entries():
        if team in seen:
            yield FieldError(path, f"team {team!r} is already defined at {seen[team]}; rename one")
        else:
            seen[team] = path


def topology_problems(cfg: PlatformConfig) -> Iterator[FieldError]:
    for name, cluster in cfg.clusters.items():
        yield from _topology(cluster.topology, f"clusters.{name}.topology")


def _topology(topo: Topology, path: str) -> Iterator[FieldError]:
    if topo.labels and topo.hypernodes:
        yield FieldError(path, "give labels or hypernodes, not both")
    if "kubernetes.io/hostname" in topo.labels.values():
        yield FieldError(
            f"{path}.labels", "kubernetes.io/hostname is the node itself, added last; drop it"
        )
    if not topo.hypernodes:
        return
    lowest = min(h.tier for h in topo.hypernodes.values())
    for name, h in topo.hypernodes.items():
        problem = _bad_name(name, 253)
        if problem:
            yield FieldError(f"{path}.hypernodes.{name}", problem)
        for i, member in enumerate(h.members):
            where = f"{path}.hypernodes.{name}.members[{i}]"
            child = topo.hypernodes.get(member)
            if h.tier == lowest and child is not None:
                yield FieldError(where, f"{member!r} is a HyperNode; tier {lowest} holds nodes")
            elif h.tier > lowest and child is None:
                yield FieldError(
                    where, f"no HyperNode {member!r}; above tier {lowest}, members are those"
                )
            elif child is not None and child.tier >= h.tier:
                yield FieldError(
                    where, f"{member!r} is tier {child.tier}; members are of lower tiers"
                )
