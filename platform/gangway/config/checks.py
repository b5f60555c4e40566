"""What only the whole config can tell: quotas against each other and their parents, names
that must be unique or must exist. A pure function: every problem, each with its field path."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal

from gangway.config.naming import name_problems, topology_problems
from gangway.config.provisioning import provisioning_problems
from gangway.config.schema import Org, PlatformConfig, Quota, Team
from gangway.errors import FieldError

__all__ = ["problems"]


def problems(cfg: PlatformConfig) -> list[FieldError]:
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
        *_provisioning(cfg),
        *_alerts(cfg),
    ]


def _teams(cfg: PlatformConfig) -> Iterator[tuple[str, Team]]:
    return ((path, team) for path, _org, _name, team in cfg.team_entries())


def _quotas(cfg: PlatformConfig) -> Iterator[tuple[str, Quota]]:
    yield from ((f"orgs.{name}", org) for name, org in cfg.orgs.items())
    yield from _teams(cfg)


def _priority_classes(cfg: PlatformConfig) -> Iterator[FieldError]:
    known = sorted(cfg.priority_classes)
    if cfg.default_priority_class not in cfg.priority_classes:
        yield (
            FieldError(
                "default_priority_class",
                f"{cfg.default_priority_class!r} is not in priority_classes ({', '.join(known)})",
            )
        )
    for path, team in _teams(cfg):
        for i, pc in enumerate(team.priority_classes):
            if pc not in cfg.priority_classes:
                yield (
                    FieldError(
                        f"{path}.priority_classes[{i}]",
                        f"unknown priority class {pc!r}; "
                        f"define it under priority_classes or use one of {', '.join(known)}",
                    )
                )


def _names(cfg: PlatformConfig) -> Iterator[FieldError]:
    """Queues and namespaces name one thing each; Volcano's root and default queues are its
    own."""
    queues: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for name in cfg.orgs:
        queues.setdefault(cfg.org_queue(name), f"orgs.{name}")
    for path, _org, name, team in cfg.team_entries():
        for seen, value, what in (
            (queues, team.queue_of(name), "queue"),
            (namespaces, team.namespace_of(name), "namespace"),
        ):
            if value in seen and seen[value] != path:
                yield FieldError(
                    f"{path}.{what}",
                    f"{value!r} is already the {what} of {seen[value]}; rename one",
                )
            else:
                seen[value] = path
    for builtin in ("root", "default"):
        if builtin in queues:
            yield FieldError(
                f"{queues[builtin]}.queue", f"{builtin!r} is Volcano's own queue; choose another"
            )


def _storage_and_images(cfg: PlatformConfig) -> Iterator[FieldError]:
    for name, cluster in cfg.clusters.items():
        if cluster.region not in cfg.storage.buckets:
            yield (
                FieldError(
                    f"clusters.{name}.region",
                    f"no storage.buckets entry for {cluster.region!r}; add "
                    "the artifact bucket of that region",
                )
            )
    uris = [(f"storage.buckets.{r}", u) for r, u in cfg.storage.buckets.items()]
    for path, uri in [*uris, ("mlflow.artifacts", cfg.mlflow.artifacts)]:
        if not uri.startswith("s3://") or not uri.removeprefix("s3://").split("/")[0]:
            yield FieldError(path, f"{uri!r} is not an s3://BUCKET URI")
    for i, registry in enumerate(cfg.registries):
        if not registry.endswith("/") or registry.strip("/") == "":
            yield (
                FieldError(
                    f"registries[{i}]",
                    f"{registry!r} must be a prefix ending in '/' "
                    "(e.g. ghcr.io/gangway/), or it would allow look-alike registries",
                )
            )
    allowed = ", ".join(cfg.registries)
    for field, image in (("image", cfg.image), ("argo_executor_image", cfg.executor_image)):
        if not any(image.startswith(r) for r in cfg.registries):
            yield FieldError(field, f"{image!r} is not from an allowed registry ({allowed})")


def _over(have: Mapping[str, Decimal], limit: Mapping[str, Decimal]) -> list[tuple[str, str, str]]:
    """``(resource, amount, limit)`` for each resource of which ``have`` has more than
    ``limit`` (of those ``limit`` sets)."""
    return sorted(
        (k, _show(k, v), _show(k, limit[k])) for k, v in have.items() if k in limit and v > limit[k]
    )


def _show(resource: str, amount: Decimal) -> str:
    """An amount as people write it: memory in Gi, the rest as a plain number."""
    if resource == "memory":
        return f"{amount / 2**30:g}Gi"
    return f"{amount.normalize():f}"


def _quota(q: Quota, path: str) -> Iterator[FieldError]:
    fix = "lower it or raise that"
    if q.capability is not None:
        for what in ("guarantee", "deserved"):
            for r, have, cap in _over(getattr(q, what).amounts(), q.capability.amounts()):
                yield (
                    FieldError(
                        f"{path}.{what}.{_field(r)}",
                        f"{have} is more than its capability ({cap}); {fix}",
                    )
                )
    for r, have, deserved in _over(q.guarantee.amounts(), q.deserved.amounts()):
        yield (
            FieldError(
                f"{path}.guarantee.{_field(r)}",
                f"{have} is more than its deserved share ({deserved}); {fix}",
            )
        )


def _children(org: Org, path: str) -> Iterator[FieldError]:
    """The teams of an org fit in it: each capability within the org's, the sums of their
    guarantees and deserved shares within the org's."""
    for name, team in org.teams.items():
        if org.capability is not None and team.capability is not None:
            for r, have, cap in _over(team.capability.amounts(), org.capability.amounts()):
                yield (
                    FieldError(
                        f"{path}.teams.{name}.capability.{_field(r)}",
                        f"{have} is more than the org's "
                        f"capability ({cap}); a child queue cannot exceed its parent",
                    )
                )
    if org.capability is not None and org.capability.gpu:
        gpus = sum(org.capability.gpu.values())  # a Volcano Queue adds every GPU type up
        for name, team in org.teams.items():
            mine = sum(team.capability.gpu.values()) if team.capability else 0
            if mine > gpus:
                yield (
                    FieldError(
                        f"{path}.teams.{name}.capability.gpu",
                        f"{mine} GPUs in all, more than the "
                        f"org's {gpus}; a child queue cannot exceed its parent",
                    )
                )
    for what in ("guarantee", "deserved"):
        total = _sum([getattr(t, what).amounts() for t in org.teams.values()])
        for r, have, limit in _over(total, getattr(org, what).amounts()):
            yield (
                FieldError(
                    f"{path}.teams",
                    f"their {what}s add up to {have}, more than the org's "
                    f"{what}.{_field(r)} ({limit}); raise the org's or lower the teams'",
                )
            )


def _sum(parts: list[dict[str, Decimal]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, Decimal(0)) + v
    return total


def _field(resource: str) -> str:
    return resource.replace("gpu:", "gpu.")


def _gpu_types(cfg: PlatformConfig) -> Iterator[FieldError]:
    """Every GPU type a quota names is somewhere: a cluster has it or provisions it."""
    have = cfg.gpu_types() | {
        t for c in cfg.clusters.values() if c.provisioning for t in c.provisioning.gpus
    }
    for path, q in _quotas(cfg):
        for what in ("guarantee", "deserved", "capability"):
            res = getattr(q, what)
            for t in sorted((res.gpu if res is not None else {}).keys() - have):
                yield (
                    FieldError(
                        f"{path}.{what}.gpu.{t}",
                        f"no cluster has or provisions {t} GPUs (clusters have: "
                        f"{', '.join(sorted(have)) or 'none'}); add it to a cluster's gpus "
                        "or provisioning.gpus, or remove it from the quota",
                    )
                )


def _provisioning(cfg: PlatformConfig) -> Iterator[FieldError]:
    granted = cfg.granted_gpus()
    for name, c in cfg.clusters.items():
        if c.provisioning is not None:
            path = f"clusters.{name}.provisioning"
            yield from provisioning_problems(path, c.provisioning, c.gpu_products, granted)


def _alerts(cfg: PlatformConfig) -> Iterator[FieldError]:
    """``alerts.queues`` names queues of the config; the nightly eval's clusters exist and have
    a Prometheus (its alerts are rendered only there); the runbooks' base is absolute (a
    relative ``runbook_url`` is a dead link in Alertmanager and Slack)."""
    base = cfg.alerts.runbook_base_url
    if base is not None and not re.match(r"^https?://[^/\s]+", base):
        yield FieldError(
            "alerts.runbook_base_url",
            f"{base!r} is not an absolute URL: give an absolute http(s) URL where the runbooks "
            "are published (https://github.com/ORG/REPO/blob/main/docs/runbooks)",
        )
    queues = sorted({v.queue for v in cfg.team_views().values()})
    for q in cfg.alerts.queues:
        if q not in queues:
            yield FieldError(f"alerts.queues.{q}", f"no queue {q!r}; queues: {', '.join(queues)}")
    for i, c in enumerate(cfg.alerts.nightly_eval.clusters):
        path = f"alerts.nightly_eval.clusters[{i}]"
        if c not in cfg.clusters:
            yield FieldError(path, f"no cluster {c!r}; clusters: {', '.join(cfg.clusters)}")
        elif not cfg.clusters[c].prometheus_url:
            yield FieldError(path, f"cluster {c!r} has no prometheus_url: give it one")
