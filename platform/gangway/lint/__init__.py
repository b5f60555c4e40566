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
value is known before the run. What a manifest must be follows its action
(:mod:`gangway.lint.resources`: a whole object to create, a name to get or delete, a JSON
patch, a partial object to merge). The pod rules see every container Argo puts in a pod —
sidecars, init containers, a containerSet's, inline templates', ``templateDefaults`` merged in,
``podSpecPatch`` read — each finding at the field that writes it (:mod:`gangway.lint.pods`,
:mod:`gangway.lint.pod_spec_patch`). In a WorkflowTemplate, a workflow parameter it does not
declare is a warning (the Workflow using it may supply it), as Argo validates templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gangway.argo.scope import static_scope, workflow_spec
from gangway.argo.substitution import PLACEHOLDER
from gangway.argo.template_defaults import merge_defaults
from gangway.argo.validation import validation_problems
from gangway.config import PlatformConfig, load_config
from gangway.errors import FieldError
from gangway.lint.argo_rules import TEMPLATE_KINDS, check_workflow
from gangway.lint.crds import CrdSchemas
from gangway.lint.platform_rules import check_pod, check_pod_fields, known_gpu_products
from gangway.lint.pod_spec_patch import check_pod_spec_patch
from gangway.lint.pods import every_template, pod_containers, source_path
from gangway.lint.resources import ResourceContext, lint_resource
from gangway.lint.structural import validate_structure
from gangway.lint.team_rules import check_team

__all__ = ["CrdSchemas", "FieldError", "lint_manifest"]

WORKFLOW_KINDS = {"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow"}


def lint_manifest(
    obj: Mapping[str, Any],
    schemas: CrdSchemas | None,
    config: PlatformConfig | None = None,
    *,
    platform: bool = True,
) -> list[FieldError]:
    """Every finding for one manifest (errors and warnings), in a stable order.

    ``schemas=None`` skips the structural check against the CRDs (the rest needs no cluster);
    ``config`` is the platform config (default: :func:`gangway.config.load_config`);
    ``platform=False`` skips the platform rules (and reads no platform config).
    """
    meta = obj.get("metadata") or {}
    name = f"{obj.get('kind')}/{meta.get('name') or (meta.get('generateName') or '?') + '*'}"
    findings = validate_structure(dict(obj), schemas, name) if schemas is not None else []
    if obj.get("kind") not in WORKFLOW_KINDS:
        return findings
    base = "spec.workflowSpec" if obj.get("kind") == "CronWorkflow" else "spec"
    malformed = [replace(f, obj=name) for f in validation_problems(workflow_spec(obj), base)]
    findings += malformed
    if malformed:  # the rules below read what these fields hold: they wait for a fix
        return _dedupe(findings)
    findings += check_workflow(obj, name)
    cfg = (config or load_config()) if platform else None
    if cfg is not None:
        findings += check_team(obj, name, cfg)
    products = known_gpu_products(cfg) if cfg is not None else frozenset()
    spec = workflow_spec(obj)
    labels = {
        **((obj.get("metadata") or {}).get("labels") or {}),
        **((spec.get("workflowMetadata") or {}).get("labels") or {}),
    }
    ctx = ResourceContext(
        spec, labels, schemas, platform, products, obj.get("kind") in TEMPLATE_KINDS
    )
    if platform:
        findings += list(check_pod_fields(spec, base, name))
    for tp, t in every_template(spec, base):
        if platform:
            findings += _check_template_pod(t, tp, base, ctx, name)
        if (t.get("resource") or {}).get("manifest"):
            findings += lint_resource(t, tp, ctx)
    return _dedupe(findings)


def _check_template_pod(
    t: Mapping[str, Any], tp: str, base: str, ctx: ResourceContext, name: str
) -> list[FieldError]:
    """The platform's pod rules for every container of a template's pod (main, sidecars,
    init containers, a containerSet's), on the pod Argo makes of it: ``spec.templateDefaults``
    merged in, the values known before the run filled in (so ``-p`` values are checked as
    they will be submitted), the workflow's pod-level settings merged in as Argo merges them
    (a template's nodeSelector and tolerations replace the workflow's); then the
    ``podSpecPatch`` of the workflow and of the template (:mod:`gangway.lint.pod_spec_patch`)."""
    spec = ctx.spec
    defaults = spec.get("templateDefaults") or {}
    found = pod_containers(t, tp, defaults, f"{base}.templateDefaults")
    if not found:
        return []
    merged = merge_defaults(defaults, t)
    pod = {
        "securityContext": {
            **(spec.get("securityContext") or {}),
            **(merged.get("securityContext") or {}),
        },
        "nodeSelector": merged.get("nodeSelector") or spec.get("nodeSelector") or {},
        "tolerations": merged.get("tolerations") or spec.get("tolerations") or [],
        "volumes": merged.get("volumes") or [],
    }
    scope = static_scope(t, spec, ctx.labels, stand_ins=False)
    findings = check_pod(
        [_fill_tree(pc.container, scope) for pc in found],
        _fill_tree(pod, scope),
        tp,
        name,
        [pc.path for pc in found],
        gpu_products=ctx.products,
    )
    out = []
    for f in findings:
        pc = next((pc for pc in found if f.path.startswith(pc.path + ".")), None)
        out.append(replace(f, path=source_path(pc, f.path)) if pc else f)
    names = {str(pc.container.get("name")) for pc in found if not pc.main}
    for where, text in ((base, spec.get("podSpecPatch")), (tp, merged.get("podSpecPatch"))):
        if text:
            out += check_pod_spec_patch(
                str(text), f"{where}.podSpecPatch", name, names, lambda s: _fill_tree(s, scope)
            )
    return out


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


def _dedupe(findings: list[FieldError]) -> list[FieldError]:
    """One finding per (object, field): the schema and Argo's rules may both catch a value."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        if (f.obj, f.path) not in seen:
            seen.add((f.obj, f.path))
            out.append(f)
    return out
