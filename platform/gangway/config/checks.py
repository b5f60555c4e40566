"""What only the whole config can tell: quotas against each other and their parents, names
that must be unique or must exist. A pure function: every problem, each with its field path."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from gangway.config.model import GPU_RESOURCE, Org, PlatformConfig, Quota, Resources, Team
from gangway.config.naming import name_problems, topology_problems

__all__ = ["problems"]


def problems(cfg: PlatformConfig) -> list[str]:
    """Every cross-field problem of ``cfg`` as ``path: what is wrong and what to do``."""
    return [
        *_priority_classes(cfg),
        *_names(cfg),
        *name_problems(cfg),
        *topology_problems(cfg),
        *_storage_and_images(cfg),
        *(p for path, q in _quotas(cfg) for p in _quota(q, path)),
        *(p for name, org in cfg.orgs.items() for p in _children(org, f"orgs.{name}")),
        *_gpu_types(cfg),
    ]


def _teams(cfg: PlatformConfig) -> Iterator[tuple[str, Team]]:
    for o, org in cfg.orgs.items():
        for name, team in org.teams.items():
            yield f"orgs.{o}.teams.{name}", team
    for name, team in cfg.teams.items():
        yield f"teams.{name}", team


def _quotas(cfg: PlatformConfig) -> Iterator[tuple[str, Quota]]:
    yield from ((f"orgs.{name}", org) for name, org in cfg.orgs.items())
    yield from _teams(cfg)


def _priority_classes(cfg: PlatformConfig) -> Iterator[str]:
    known = sorted(cfg.priority_classes)
    if cfg.default_priority_class not in cfg.priority_classes:
        yield (
            f"default_priority_class: {cfg.default_priority_class!r} is not in priority_classes "
            f"({', '.join(known)})"
        )
    for path, team in _teams(cfg):
        for i, pc in enumerate(team.priority_classes):
            if pc not in cfg.priority_classes:
                yield (
                    f"{path}.priority_classes[{i}]: unknown priority class {pc!r}; "
                    f"define it under priority_classes or use one of {', '.join(known)}"
                )


def _names(cfg: PlatformConfig) -> Iterator[str]:
    """Queues and namespaces name one thing each; Volcano's root and default queues are its
    own."""
    queues: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for name, org in cfg.orgs.items():
        queues.setdefault(org.queue or name, f"orgs.{name}")
    for path, team in _teams(cfg):
        name = path.rsplit(".", 1)[1]
        for seen, value, what in (
            (queues, team.queue or name, "queue"),
            (namespaces, team.namespace or f"team-{name}", "namespace"),
        ):
            if value in seen and seen[value] != path:
                yield f"{path}.{what}: {value!r} is already the {what} of {seen[value]}; rename one"
            else:
                seen[value] = path
    for builtin in ("root", "default"):
        if builtin in queues:
            yield f"{queues[builtin]}.queue: {builtin!r} is Volcano's own queue; choose another"


def _storage_and_images(cfg: PlatformConfig) -> Iterator[str]:
    for name, cluster in cfg.clusters.items():
        if cluster.region not in cfg.storage.buckets:
            yield (
                f"clusters.{name}.region: no storage.buckets entry for {cluster.region!r}; add "
                "the artifact bucket of that region"
            )
    uris = [(f"storage.buckets.{r}", u) for r, u in cfg.storage.buckets.items()]
    for path, uri in [*uris, ("mlflow.artifacts", cfg.mlflow.artifacts)]:
        if not uri.startswith("s3://") or not uri.removeprefix("s3://").split("/")[0]:
            yield f"{path}: {uri!r} is not an s3://BUCKET URI"
    for i, registry in enumerate(cfg.registries):
        if not registry.endswith("/") or registry.strip("/") == "":
            yield (
                f"registries[{i}]: {registry!r} must be a prefix ending in '/' "
                "(e.g. ghcr.io/gangway/), or it would allow look-alike registries"
            )
    allowed = ", ".join(cfg.registries)
    for field, image in (("image", cfg.image), ("argo_executor_image", cfg.executor_image)):
        if not any(image.startswith(r) for r in cfg.registries):
            yield f"{field}: {image!r} is not from an allowed registry ({allowed})"


def _over(small: Resources, big: Resources) -> list[tuple[str, str, str]]:
    """``(resource, small's amount, big's amount)`` for each resource of which ``small`` has
    more than ``big`` (of those ``big`` sets)."""
    have, limit = small.amounts(), big.amounts()
    return sorted(
        (k, _show(k, v), _show(k, limit[k])) for k, v in have.items() if k in limit and v > limit[k]
    )


def _show(resource: str, amount: Decimal) -> str:
    """An amount as people write it: memory in Gi, the rest as a plain number."""
    if resource == "memory":
        return f"{amount / 2**30:g}Gi"
    return f"{amount.normalize():f}"


def _quota(q: Quota, path: str) -> Iterator[str]:
    fix = "lower it or raise that"
    if q.capability is not None:
        for what in ("guarantee", "deserved"):
            for r, have, cap in _over(getattr(q, what), q.capability):
                yield (
                    f"{path}.{what}.{_field(r)}: {have} is more than its capability ({cap}); " + fix
                )
    for r, have, deserved in _over(q.guarantee, q.deserved) if q.deserved.amounts() else []:
        yield (
            f"{path}.guarantee.{_field(r)}: {have} is more than its deserved share "
            f"({deserved}); {fix}"
        )


def _children(org: Org, path: str) -> Iterator[str]:
    """The teams of an org fit in it: each capability within the org's, the sums of their
    guarantees and deserved shares within the org's."""
    for name, team in org.teams.items():
        if org.capability is not None and team.capability is not None:
            for r, have, cap in _over(team.capability, org.capability):
                yield (
                    f"{path}.teams.{name}.capability.{_field(r)}: {have} is more than the org's "
                    f"capability ({cap}); a child queue cannot exceed its parent"
                )
    if org.capability is not None:  # in a Volcano Queue every GPU type adds up to one number
        gpus = org.capability.resource_list().get(GPU_RESOURCE)
        for name, team in org.teams.items():
            mine = team.capability.resource_list().get(GPU_RESOURCE) if team.capability else None
            if gpus is not None and mine is not None and int(mine) > int(gpus):
                yield (
                    f"{path}.teams.{name}.capability.gpu: {mine} GPUs in all, more than the "
                    f"org's {gpus}; a child queue cannot exceed its parent"
                )
    for what in ("guarantee", "deserved"):
        total = _sum([getattr(t, what) for t in org.teams.values()])
        for r, have, limit in _over(total, getattr(org, what)):
            yield (
                f"{path}.teams: their {what}s add up to {have}, more than the org's "
                f"{what}.{_field(r)} ({limit}); raise the org's or lower the teams'"
            )


def _sum(parts: list[Resources]) -> Resources:
    cpu = sum((p.amounts().get("cpu", Decimal(0)) for p in parts), Decimal(0))
    memory = sum((p.amounts().get("memory", Decimal(0)) for p in parts), Decimal(0))
    gpu: dict[str, int] = {}
    for p in parts:
        for t, n in p.gpu.items():
            gpu[t] = gpu.get(t, 0) + n
    return Resources(cpu=str(cpu) if cpu else None, memory=str(memory) if memory else None, gpu=gpu)


def _field(resource: str) -> str:
    return resource.replace("gpu:", "gpu.")


def _gpu_types(cfg: PlatformConfig) -> Iterator[str]:
    have = cfg.gpu_types()
    for path, q in _quotas(cfg):
        for what in ("guarantee", "deserved", "capability"):
            res = getattr(q, what)
            for t in sorted((res.gpu if res is not None else {}).keys() - have):
                yield (
                    f"{path}.{what}.gpu.{t}: no cluster has {t} GPUs (clusters have: "
                    f"{', '.join(sorted(have)) or 'none'})"
                )
