"""A resource template's manifest, read as the executor hands it to kubectl.

What the manifest must be depends on the action (Argo's executor, ``getKubectlArguments``):

* ``create``, ``apply``, ``replace``: a whole object, ``kubectl ACTION -f``: checked against its
  kind's schema, and, for a Volcano Job, by the gang and pod rules;
* ``get``, ``delete``: ``kubectl ACTION -f`` only reads which object: its apiVersion, kind and
  ``metadata.name`` (no spec); with ``flags`` naming the object the manifest may be left out;
* ``patch`` with ``mergeStrategy: json``: a JSON patch, a list of operations, applied to the
  object ``flags`` names;
* ``patch`` with ``merge`` or ``strategic`` (the default): a partial object; with a ``kind`` it
  names its object (``-f``), without one ``flags`` must. Its fields are checked against the
  schema, none of them required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gangway.argo.manifests import fill_manifest
from gangway.argo.scope import static_scope
from gangway.argo.substitution import PLACEHOLDER
from gangway.errors import FieldError, PermanentError
from gangway.lint._findings import finding
from gangway.lint.platform_rules import (
    check_do_not_disrupt,
    check_gang,
    check_launch,
    check_pod,
)
from gangway.lint.structural import validate_structure
from gangway.volcano.gang import is_job, pod_specs

if TYPE_CHECKING:
    from gangway.lint.crds import CrdSchemas

__all__ = ["ResourceContext", "lint_resource"]

JSON_PATCH_OPS = ("add", "remove", "replace", "move", "copy", "test")
"""RFC 6902's operations."""


@dataclass(frozen=True)
class ResourceContext:
    """What linting one resource template needs from its workflow."""

    spec: Mapping[str, Any]
    labels: Mapping[str, str]
    schemas: CrdSchemas | None
    platform: bool
    products: frozenset[str]
    template_kind: bool
    """A WorkflowTemplate: workflow parameters it does not declare may come with the Workflow."""


def lint_resource(template: Mapping[str, Any], tp: str, ctx: ResourceContext) -> list[FieldError]:
    """Every finding for the manifest of the resource template ``template`` (at ``tp``)."""
    res = template.get("resource") or {}
    manifest = str(res.get("manifest") or "")
    if not manifest:
        return []
    where = f"resource in template {template.get('name')}"
    at = f"{tp}.resource.manifest"
    scope = static_scope(template, ctx.spec, ctx.labels)
    if ctx.template_kind:
        scope = {**_undeclared_stand_ins(manifest, scope), **scope}
    try:
        obj = fill_manifest(manifest, scope, where="")
    except PermanentError as e:
        return [finding(where, at, str(e))]
    action = str(res.get("action") or "")
    flags = [str(f) for f in res.get("flags") or []]
    if action == "patch":
        strategy = str(res.get("mergeStrategy") or "strategic")
        if strategy == "json":
            return _json_patch(obj, flags, where, at)
        return _partial(obj, flags, where, at, ctx, "patch")
    if action in ("get", "delete"):
        return _names_object(obj, flags, where, at, action)
    if not isinstance(obj, dict):
        return [finding(where, at, "is not a Kubernetes object")]
    return _created(obj, template, ctx)


def _undeclared_stand_ins(manifest: str, scope: Mapping[str, str]) -> dict[str, str]:
    """A stand-in for each ``{{workflow.parameters.X}}`` the template does not declare."""
    refs = (m.group(2) for m in PLACEHOLDER.finditer(manifest) if not m.group(1))
    return {r: "placeholder" for r in refs if r.startswith("workflow.parameters.")}


def _identity(obj: Mapping[str, Any]) -> list[str]:
    """What of apiVersion, kind and metadata.name ``obj`` lacks (kubectl -f needs them)."""
    meta = obj.get("metadata")
    named = isinstance(meta, Mapping) and bool(meta.get("name"))
    have = {"apiVersion": bool(obj.get("apiVersion")), "kind": bool(obj.get("kind"))}
    return [k for k, ok in [*have.items(), ("metadata.name", named)] if not ok]


def _names_object(obj: Any, flags: list[str], where: str, at: str, action: str) -> list[FieldError]:
    if not isinstance(obj, dict):
        return [finding(where, at, f"is not a Kubernetes object: {action} needs one to name")]
    missing = _identity(obj)
    if missing and not flags:
        return [
            finding(
                where,
                at,
                f"kubectl {action} -f reads which object from the manifest: add "
                f"{', '.join(missing)} (its spec is not needed), or name it in flags",
            )
        ]
    return []


def _json_patch(obj: Any, flags: list[str], where: str, at: str) -> list[FieldError]:
    out: list[FieldError] = []
    if not isinstance(obj, list):
        return [
            finding(
                where,
                at,
                "mergeStrategy json: the manifest is a JSON patch, a list of operations "
                "(- op: replace, path: /spec/x, value: ...)",
            )
        ]
    for i, op in enumerate(obj):
        if not isinstance(op, dict) or op.get("op") not in JSON_PATCH_OPS:
            out.append(
                finding(where, f"{at}[{i}].op", f"must be one of {', '.join(JSON_PATCH_OPS)}")
            )
        elif not str(op.get("path", "")).startswith("/"):
            out.append(finding(where, f"{at}[{i}].path", "must be a JSON pointer (/a/b)"))
    if not flags:
        out.append(
            finding(
                where,
                at,
                "a JSON patch does not name its object: give its kind and name in flags "
                "(flags: [configmap, my-config])",
            )
        )
    return out


def _partial(
    obj: Any, flags: list[str], where: str, at: str, ctx: ResourceContext, action: str
) -> list[FieldError]:
    if not isinstance(obj, dict):
        return [finding(where, at, "a merge patch is a partial object (a mapping)")]
    if not obj.get("kind"):
        if flags:
            return []  # kubectl patch FLAGS --patch-file: the flags name the object
        return [
            finding(
                where,
                at,
                "the patch does not name its object: add apiVersion, kind and metadata.name, "
                "or give the kind and name in flags",
            )
        ]
    missing = [m for m in _identity(obj) if m != "kind"]
    if missing and not flags:
        return [finding(where, at, f"kubectl {action} -f needs {', '.join(missing)}; add it")]
    name = f"{obj.get('kind')} patch in {where.removeprefix('resource in ')}"
    if ctx.schemas is None:
        return []
    return validate_structure(obj, ctx.schemas, name, partial=True)


def _created(
    job: dict[str, Any], template: Mapping[str, Any], ctx: ResourceContext
) -> list[FieldError]:
    name = f"{job.get('kind')} in template {template.get('name')}"
    findings = validate_structure(job, ctx.schemas, name) if ctx.schemas is not None else []
    if ctx.platform and is_job(job):
        findings += check_gang(job, name)
        findings += check_do_not_disrupt(job, name)
        for path, pod in pod_specs(job):
            every = [
                (c, f"{path}.{key}[{k}]")
                for key in ("containers", "initContainers")
                for k, c in enumerate(pod.get(key) or [])
            ]
            findings += check_pod(
                [c for c, _ in every],
                {**pod, "initContainers": []},  # counted among ``every`` for the GPU rules
                path,
                name,
                [p for _, p in every],
                gang=True,
                gpu_products=ctx.products,
            )
            for k, c in enumerate(pod.get("containers") or []):
                findings += check_launch(c, f"{path}.containers[{k}]", name)
    return findings
