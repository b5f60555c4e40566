"""``gangway lint``: what Argo and Volcano will say about a manifest, before submitting it.

1. **Structure** — every object (Workflow, WorkflowTemplate, CronWorkflow, and the object
   each resource template creates) against the openAPIV3Schema of the installed CRDs
   (:mod:`gangway.lint.crds`), or, for a core Kubernetes kind (Service, ConfigMap, Job ...),
   its schema from ``kubernetes-validate`` (:mod:`gangway.lint.core_kinds`), unknown fields
   included; a kind neither knows is a warning.
2. **Semantics** Argo checks — names, template and task references, declared parameters, DAG
   cycles, retry policies, resource conditions (:mod:`gangway.lint.argo_rules`).
3. **Platform rules** — whole gangs, GPU type selection (and only GPU pods on GPU nodes), Pod
   Security "restricted" (with its one exception, IPC_LOCK for RDMA gang pods), secrets by
   reference (:mod:`gangway.lint.platform_rules`); a team's queue, priority classes and image
   registries, from the platform config (:mod:`gangway.lint.team_rules`). Skipped with
   ``platform=False`` (``gangway lint --no-platform``): then only what Argo and Kubernetes
   would refuse is reported.

A resource template's object (a Volcano Job, a Service ...) is checked as Argo would create
it: the template's placeholders are filled from the calling task's or step's arguments and the
workflow parameters' defaults; so are a container or script template's pod fields, where the
value is known before the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangway.argo.manifests import fill_manifest
from gangway.argo.scope import static_scope, workflow_spec
from gangway.argo.substitution import PLACEHOLDER
from gangway.config import PlatformConfig, load_config
from gangway.errors import PermanentError
from gangway.lint._findings import Finding
from gangway.lint.argo_rules import check_workflow
from gangway.lint.crds import CrdSchemas
from gangway.lint.platform_rules import check_gang, check_launch, check_pod, known_gpu_products
from gangway.lint.structural import validate_structure
from gangway.lint.team_rules import check_team
from gangway.volcano.gang import is_job, pod_specs

__all__ = ["CrdSchemas", "Finding", "lint_manifest"]

WORKFLOW_KINDS = {"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow"}


def lint_manifest(
    obj: Mapping[str, Any],
    schemas: CrdSchemas | None,
    config: PlatformConfig | None = None,
    *,
    platform: bool = True,
) -> list[Finding]:
    """Every finding for one manifest (errors and warnings), in a stable order.

    ``schemas=None`` skips the structural check against the CRDs (the rest needs no cluster);
    ``config`` is the platform config (default: :func:`gangway.config.load_config`);
    ``platform=False`` skips the platform rules (and reads no platform config).
    """
    name = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name', '?')}"
    findings = validate_structure(dict(obj), schemas, name) if schemas is not None else []
    if obj.get("kind") not in WORKFLOW_KINDS:
        return findings
    findings += check_workflow(obj, name)
    cfg = (config or load_config()) if platform else None
    if cfg is not None:
        findings += check_team(obj, name, cfg)
    products = known_gpu_products(cfg) if cfg is not None else frozenset()
    spec = workflow_spec(obj)
    base = "spec.workflowSpec" if obj.get("kind") == "CronWorkflow" else "spec"
    labels = {
        **((obj.get("metadata") or {}).get("labels") or {}),
        **((spec.get("workflowMetadata") or {}).get("labels") or {}),
    }
    for i, t in enumerate(spec.get("templates") or []):
        tp = f"{base}.templates[{i}]"
        if platform:
            findings += _check_template_pod(t, spec, labels, tp, name, products)
        manifest = (t.get("resource") or {}).get("manifest")
        if manifest:
            findings += _lint_resource(
                str(manifest), t, spec, labels, schemas, tp, platform, products
            )
    return _dedupe(findings)


def _check_template_pod(
    t: Mapping[str, Any],
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    tp: str,
    name: str,
    products: frozenset[str],
) -> list[Finding]:
    """The platform's pod rules for a container or script template, on the pod Argo makes of
    it: the values known before the run filled in (so ``-p`` values are checked as they will
    be submitted), the workflow's pod-level settings merged in as Argo merges them (a
    template's nodeSelector and tolerations replace the workflow's)."""
    body = t.get("container") or t.get("script")
    if body is None:
        return []
    pod = {
        "securityContext": {
            **(spec.get("securityContext") or {}),
            **(t.get("securityContext") or {}),
        },
        "nodeSelector": t.get("nodeSelector") or spec.get("nodeSelector") or {},
        "tolerations": t.get("tolerations") or spec.get("tolerations") or [],
        "volumes": [*(spec.get("volumes") or []), *(t.get("volumes") or [])],
        "hostNetwork": spec.get("hostNetwork"),
    }
    scope = static_scope(t, spec, labels, stand_ins=False)
    key = "container" if "container" in t else "script"
    return check_pod(
        [_fill_tree(body, scope)],
        _fill_tree(pod, scope),
        tp,
        name,
        [f"{tp}.{key}"],
        gpu_products=products,
    )


def _fill_tree(obj: Any, scope: Mapping[str, str]) -> Any:
    """``obj`` with each ``{{name}}`` that ``scope`` knows filled in, in every string, as Argo
    fills a container template's fields one by one; anything else is left as written."""
    if isinstance(obj, str):
        return PLACEHOLDER.sub(
            lambda m: m.group(0) if m.group(1) else scope.get(m.group(2), m.group(0)), obj
        )
    if isinstance(obj, list):
        return [_fill_tree(v, scope) for v in obj]
    if isinstance(obj, Mapping):
        return {k: _fill_tree(v, scope) for k, v in obj.items()}
    return obj


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per (object, field): the schema and Argo's rules may both catch a value."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        if (f.obj, f.path) not in seen:
            seen.add((f.obj, f.path))
            out.append(f)
    return out


def _lint_resource(
    manifest: str,
    template: Mapping[str, Any],
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    schemas: CrdSchemas | None,
    tp: str,
    platform: bool,
    products: frozenset[str],
) -> list[Finding]:
    where = f"resource in template {template.get('name')}"
    scope = static_scope(template, spec, labels)
    try:
        job = fill_manifest(manifest, scope, where="")
    except PermanentError as e:
        return [Finding(where, f"{tp}.resource.manifest", str(e))]
    if not isinstance(job, dict):
        return [Finding(where, f"{tp}.resource.manifest", "is not a Kubernetes object")]
    name = f"{job.get('kind')} in template {template.get('name')}"
    findings = validate_structure(job, schemas, name) if schemas is not None else []
    if platform and is_job(job):
        findings += check_gang(job, name)
        for path, pod in pod_specs(job):
            containers = pod.get("containers") or []
            paths = [f"{path}.containers[{k}]" for k in range(len(containers))]
            findings += check_pod(
                containers, pod, path, name, paths, gang=True, gpu_products=products
            )
            for c, cpath in zip(containers, paths, strict=True):
                findings += check_launch(c, cpath, name)
    return findings
