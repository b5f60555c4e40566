"""Drift between a cluster and what ``gangway manifests render`` makes for it: a pure function
of the rendered objects and the live ones (read by :mod:`gangway.cluster.doctor`), every
difference a :class:`~gangway.errors.FieldError` — the object, the field path, what is wrong
and the command that fixes it — grouped by the check it belongs to.

What is compared:

- **CRDs**: the kinds Gangway's pipelines need (Argo's Workflow, WorkflowTemplate, CronWorkflow
  and WorkflowTaskResult; Volcano's Job, Queue, PodGroup and HyperNode) and every kind the
  rendering holds (a PodMonitor: the Prometheus operator's) are served by an installed CRD at
  the API version rendered, and each project is at the version Gangway targets
  (:data:`TARGETS`). The version is read from the CRDs where they carry it
  (``operator.prometheus.io/version``, ``app.kubernetes.io/version``), else from the tag of
  the project's controller image (Argo's and Volcano's CRDs carry none): older is a
  difference, newer or unknown a warning.
- **every rendered object** (queues, priority classes, the Volcano scheduler's configuration,
  admission policies and bindings, the Argo controller's ConfigMap and its links, the PodMonitor,
  Deployments …): present, and every field rendered holds the rendered value. Fields the API
  server or a controller adds are not differences (a subset comparison); quantities compare as
  amounts (``1Ti`` = ``1024Gi``); a ConfigMap value that is YAML compares as YAML; a list of
  named items (plugins, links) compares item by item, by name.
- **queues**: a Volcano Queue on the cluster that the config does not make (Volcano's own
  ``root`` and ``default`` aside).

The check an object belongs to is its rendered file's (``queues.yaml`` → ``queues``), so an
object a new render adds is compared without a change here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from gangway.errors import FieldError
from gangway.units import quantity
from gangway.volcano.job import JOB_API_GROUP, JOB_API_VERSION, JOB_KIND
from gangway.volcano.objects import (
    HYPERNODE_KIND,
    PODGROUP_KIND,
    QUEUE_KIND,
    SCHEDULING_GROUP,
    SCHEDULING_VERSION,
    TOPOLOGY_GROUP,
    TOPOLOGY_VERSION,
)

__all__ = [
    "CRD_CHECK",
    "TARGETS",
    "Check",
    "Drift",
    "Rendered",
    "Target",
    "check_name",
    "compare",
    "describe",
    "rendered_objects",
]

Rendered = tuple[str, dict[str, Any]]
"""A rendered object and the file it is in (``base/queues.yaml``)."""
CRD_CHECK = "crds"
VOLCANO_QUEUES = ("root", "default")
"""Queues Volcano makes itself: never extra."""


def _group(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True)
class Target:
    """A project the cluster side rests on, at the version Gangway targets."""

    name: str
    version: str
    groups: tuple[str, ...]
    """Its API groups: a rendered kind in one of them needs its CRDs."""
    kinds: tuple[tuple[str, str, str], ...] = ()
    """(group, version, kind) every cluster needs, rendered or not."""
    version_keys: tuple[str, ...] = ("app.kubernetes.io/version",)
    """CRD annotations or labels that hold the project's version."""
    images: tuple[str, ...] = ()
    """Its controllers' image names (the last part of the repository): their tag is its version."""
    install: str = ""
    """The command that installs it at :attr:`version` (``{context}``, ``{namespace}``)."""


TARGETS: tuple[Target, ...] = (
    Target(
        "Argo Workflows",
        "v4.1.2",
        ("argoproj.io",),
        tuple(
            ("argoproj.io", "v1alpha1", k)
            for k in ("Workflow", "WorkflowTemplate", "CronWorkflow", "WorkflowTaskResult")
        ),
        images=("workflow-controller",),
        install="kubectl --context {context} apply -n {namespace} --server-side -f "
        "https://github.com/argoproj/argo-workflows/releases/download/v4.1.2/install.yaml",
    ),
    Target(
        "Volcano",
        "v1.15.1",
        (JOB_API_GROUP, SCHEDULING_GROUP, TOPOLOGY_GROUP),
        (
            (*_group(JOB_API_VERSION), JOB_KIND),
            (SCHEDULING_GROUP, SCHEDULING_VERSION, QUEUE_KIND),
            (SCHEDULING_GROUP, SCHEDULING_VERSION, PODGROUP_KIND),
            (TOPOLOGY_GROUP, TOPOLOGY_VERSION, HYPERNODE_KIND),
        ),
        images=("vc-scheduler", "vc-controller-manager"),
        install="helm --kube-context {context} upgrade --install volcano volcano-sh/volcano "
        "-n volcano-system --version 1.15.1",
    ),
    Target(
        "prometheus-operator",
        "v0.93.0",
        ("monitoring.coreos.com",),
        version_keys=("operator.prometheus.io/version", "app.kubernetes.io/version"),
        images=("prometheus-operator",),
        install="kubectl --context {context} apply --server-side -f https://github.com/"
        "prometheus-operator/prometheus-operator/releases/download/v0.93.0/"
        "stripped-down-crds.yaml",
    ),
)
"""What Gangway is built and tested against (the CRDs `gangway lint` reads are these)."""


@dataclass(frozen=True)
class Check:
    """One check's outcome: how many things it compared, and each difference (a warning does
    not make the cluster differ)."""

    name: str
    compared: int
    findings: tuple[FieldError, ...] = ()

    @property
    def differences(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")


@dataclass(frozen=True)
class Drift:
    """A cluster against its rendering: every check, in the order they ran."""

    cluster: str
    context: str
    checks: tuple[Check, ...]
    apply_all: str = ""
    """The command that applies the whole overlay."""

    @property
    def matches(self) -> bool:
        return all(c.differences == 0 for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "context": self.context,
            "matches": self.matches,
            "apply_all": self.apply_all,
            "checks": [
                {"check": c.name, "compared": c.compared, "differences": c.differences}
                for c in self.checks
            ],
            "findings": [
                {
                    "check": c.name,
                    "object": f.obj,
                    "path": f.path,
                    "problem": f.message,
                    "fix": f.hint,
                    "severity": f.severity,
                }
                for c in self.checks
                for f in c.findings
            ],
        }


@dataclass(frozen=True)
class _Where:
    """Where the fixes point: the cluster's kube context, Argo namespace, manifests directory."""

    context: str
    namespace: str
    manifests: str


def rendered_objects(files: Mapping[str, str], cluster: str) -> list[Rendered]:
    """The objects ``kubectl apply -k overlays/CLUSTER`` would apply, from the files
    :func:`gangway.render.render` makes: the base's and the cluster's overlay's."""
    out: list[Rendered] = []
    for rel, text in files.items():
        if rel.endswith("kustomization.yaml"):
            continue
        if rel.startswith("base/") or rel.startswith(f"overlays/{cluster}/"):
            out.extend((rel, o) for o in yaml.safe_load_all(text) if isinstance(o, dict))
    return out


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    group = _group(str(obj.get("apiVersion", "")))[0]
    return group, str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def describe(obj: Mapping[str, Any]) -> str:
    """``Kind/name`` or ``Kind/namespace/name``."""
    _, kind, ns, name = _key(obj)
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


def check_name(rel: str) -> str:
    """The check a rendered file's objects belong to: its name (``base/queues.yaml`` →
    ``queues``, ``argo-controller.yaml`` → ``argo controller``)."""
    return rel.rsplit("/", 1)[-1].removesuffix(".yaml").replace("-", " ")


def compare(
    rendered: Sequence[Rendered],
    live: Sequence[Mapping[str, Any]],
    *,
    cluster: str,
    context: str,
    namespace: str = "argo",
    manifests: str = "manifests",
    targets: Sequence[Target] = TARGETS,
) -> Drift:
    """Every difference between ``live`` (the cluster's objects: its CRDs, Deployments and
    Queues, and what it holds of each rendered object) and ``rendered`` (for ``cluster``);
    fixes name kube ``context``, Argo's ``namespace`` and the ``manifests`` directory."""
    where = _Where(context, namespace, manifests)
    index = {_key(o): o for o in live}
    checks = [_crd_check(rendered, live, targets, where)]
    by_check: dict[str, list[Rendered]] = {}
    for rel, obj in rendered:
        by_check.setdefault(check_name(rel), []).append((rel, obj))
    for name, objs in by_check.items():
        findings = [f for rel, o in objs for f in _object_findings(rel, o, index, where)]
        if name == "queues":
            findings += _extra_queues(objs, live, where)
        checks.append(Check(name, len(objs), tuple(findings)))
    return Drift(
        cluster,
        context,
        tuple(checks),
        apply_all=f"kubectl --context {context} apply -k {manifests}/overlays/{cluster}",
    )


# --- CRDs and versions ---------------------------------------------------------------------


def _crds(live: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {
        (str(spec.get("group")), str((spec.get("names") or {}).get("kind"))): o
        for o in live
        if o.get("kind") == "CustomResourceDefinition"
        for spec in [o.get("spec") or {}]
    }


def _needed(rendered: Sequence[Rendered], targets: Sequence[Target]) -> list[tuple[str, str, str]]:
    """(group, version, kind) the cluster must serve: the targets' own and every rendered kind
    outside Kubernetes' built-in groups."""
    needed = [k for t in targets for k in t.kinds]
    for _, obj in rendered:
        group, version = _group(str(obj.get("apiVersion", "")))
        builtin = "." not in group or group.endswith(".k8s.io")
        if not builtin and (group, version, str(obj.get("kind"))) not in needed:
            needed.append((group, version, str(obj.get("kind"))))
    return needed


def _crd_check(
    rendered: Sequence[Rendered],
    live: Sequence[Mapping[str, Any]],
    targets: Sequence[Target],
    where: _Where,
) -> Check:
    crds = _crds(live)
    findings: list[FieldError] = []
    used: list[Target] = []
    for group, version, kind in _needed(rendered, targets):
        target = next((t for t in targets if group in t.groups), None)
        if target is not None and target not in used:
            used.append(target)
        fix = _install(target, where) if target else f"install the CRD that defines {kind}"
        crd = crds.get((group, kind))
        if crd is None:
            findings.append(
                FieldError("", "no CRD serves this kind: not installed", fix, f"CRD {kind}.{group}")
            )
            continue
        served = [
            v.get("name") for v in (crd.get("spec") or {}).get("versions", []) if v.get("served")
        ]
        if version not in served:
            findings.append(
                FieldError(
                    "spec.versions",
                    f"serves {', '.join(map(str, served)) or 'no version'}, not {version}",
                    fix,
                    f"CRD {kind}.{group}",
                )
            )
    for target in used:
        findings.extend(_version_findings(target, live, crds, where))
    return Check(CRD_CHECK, len(_needed(rendered, targets)) + len(used), tuple(findings))


def _install(target: Target, where: _Where) -> str:
    return target.install.format(context=where.context, namespace=where.namespace)


def _versions_seen(
    target: Target,
    live: Sequence[Mapping[str, Any]],
    crds: Mapping[tuple[str, str], Mapping[str, Any]],
) -> dict[str, str]:
    """The versions ``target`` shows (version → what says so): its CRDs', else its
    controllers' image tags."""
    seen: dict[str, str] = {}
    for (group, _), crd in sorted(crds.items()):
        meta = crd.get("metadata") or {}
        tags = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        for key in target.version_keys:
            if group in target.groups and tags.get(key):
                seen.setdefault(str(tags[key]), f"CRD {meta.get('name')} ({key})")
    if seen:
        return seen
    for obj in live:
        if obj.get("kind") != "Deployment":
            continue
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in spec.get("containers") or []:
            repo, tag = _image_tag(str(c.get("image", "")))
            if repo.rsplit("/", 1)[-1] in target.images and tag:
                seen.setdefault(tag, f"{describe(obj)} image {repo}:{tag}")
    return seen


def _image_tag(image: str) -> tuple[str, str]:
    image = image.split("@", 1)[0]
    repo, _, tag = image.rpartition(":")
    return (repo, tag) if repo and "/" not in tag else (image, "")


def _semver(text: str) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def _version_findings(
    target: Target,
    live: Sequence[Mapping[str, Any]],
    crds: Mapping[tuple[str, str], Mapping[str, Any]],
    where: _Where,
) -> Iterator[FieldError]:
    obj = f"{target.name} {target.version}"
    if not any(g in target.groups for g, _ in crds):
        return  # not installed at all: the missing CRDs say so
    seen = _versions_seen(target, live, crds)
    if not seen:
        yield FieldError(
            "version",
            f"cannot tell its version: not on its CRDs, and no {'/'.join(target.images)} "
            "Deployment found",
            f"check it is {target.version}",
            obj,
            "warning",
        )
    want = _semver(target.version)
    for version, said_by in seen.items():
        have = _semver(version)
        if have == want:
            continue
        older = have is not None and want is not None and have < want
        yield FieldError(
            "version",
            f"{version} ({said_by}): {'older than' if older else 'not'} the {target.version} "
            "Gangway targets",
            _install(target, where),
            obj,
            "error" if older else "warning",
        )


# --- rendered objects ----------------------------------------------------------------------


def _object_findings(
    rel: str,
    want: Mapping[str, Any],
    index: Mapping[tuple[str, str, str, str], Mapping[str, Any]],
    where: _Where,
) -> Iterator[FieldError]:
    fix = f"kubectl --context {where.context} apply -f {where.manifests}/{rel}"
    got = index.get(_key(want))
    if got is None:
        yield FieldError("", "missing on the cluster", fix, describe(want))
        return
    meta_w, meta_g = want.get("metadata") or {}, got.get("metadata") or {}
    pairs: list[tuple[str, Any, Any]] = [
        (f"metadata.{k}", meta_w[k], meta_g.get(k))
        for k in ("labels", "annotations")
        if k in meta_w
    ]
    pairs += [
        (k, v, got.get(k))
        for k, v in want.items()
        if k not in ("apiVersion", "kind", "metadata", "status")
    ]
    for path, w, g in pairs:
        for at, problem in _differences(path, w, g):
            yield FieldError(at, problem, fix, describe(want))


_ABSENT = object()


def _show(value: Any) -> str:
    if value is _ABSENT or value is None:
        return "nothing"
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True)
    text = " ".join(str(text).split()).removesuffix(" ...")
    return repr(text) if len(text) <= 40 else repr(text[:39] + "…")


def _differences(path: str, want: Any, got: Any) -> Iterator[tuple[str, str]]:
    """(field path, what is wrong) for each rendered field ``got`` does not hold as ``want``."""
    if got is None or got is _ABSENT:
        yield path, f"not set on the cluster; rendered {_show(want)}"
    elif isinstance(want, dict) and isinstance(got, dict):
        for k, v in want.items():
            yield from _differences(f"{path}.{k}", v, got.get(k, _ABSENT))
    elif isinstance(want, list) and isinstance(got, list):
        yield from _list_differences(path, want, got)
    elif isinstance(want, str) and isinstance(got, str) and want != got:
        parsed = _as_yaml(want), _as_yaml(got)
        if isinstance(parsed[0], dict | list) and isinstance(parsed[1], dict | list):
            yield from _differences(path, parsed[0], parsed[1])
        elif not _same_amount(want, got):
            yield path, f"{_show(got)} on the cluster, {_show(want)} rendered"
    elif want != got and not _same_amount(want, got):
        yield path, f"{_show(got)} on the cluster, {_show(want)} rendered"


def _list_differences(path: str, want: list[Any], got: list[Any]) -> Iterator[tuple[str, str]]:
    def names(items: list[Any]) -> list[Any] | None:
        ok = all(isinstance(i, dict) and "name" in i for i in items)
        return [i["name"] for i in items] if ok else None

    wn, gn = names(want), names(got)
    if wn is not None and gn is not None and len(set(wn)) == len(wn):
        have = dict(zip(gn, got, strict=True))
        for name, item in zip(wn, want, strict=True):
            if name not in have:
                yield f"{path}[{name}]", "missing on the cluster"
            else:
                yield from _differences(f"{path}[{name}]", item, have[name])
        for name in gn:
            if name not in wn:
                yield f"{path}[{name}]", "on the cluster, not rendered"
    elif len(want) != len(got):
        yield path, f"{_show(got)} on the cluster, {_show(want)} rendered"
    else:
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            yield from _differences(f"{path}[{i}]", w, g)


def _as_yaml(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _same_amount(want: Any, got: Any) -> bool:
    """``1Ti`` and ``1024Gi``, ``8`` and ``'8'``: the same quantity."""
    if isinstance(want, bool) or isinstance(got, bool):
        return False
    if not all(isinstance(v, str | int | float) for v in (want, got)):
        return False
    try:
        return quantity(str(want)) == quantity(str(got))
    except (ValueError, ArithmeticError):
        return False


def _extra_queues(
    objs: Sequence[Rendered], live: Sequence[Mapping[str, Any]], where: _Where
) -> list[FieldError]:
    mine = {_key(o) for _, o in objs}
    return [
        FieldError(
            "",
            "on the cluster, not in the platform config (delete it once its jobs are gone, "
            "or add its team to the config)",
            f"kubectl --context {where.context} delete queues.{SCHEDULING_GROUP} {name}",
            f"{QUEUE_KIND}/{name}",
        )
        for o in live
        if _key(o)[:2] == (SCHEDULING_GROUP, QUEUE_KIND)
        and _key(o) not in mine
        and (name := _key(o)[3]) not in VOLCANO_QUEUES
    ]
