"""``gangway lint``: what Argo and Volcano will say about a manifest, before submitting it.

1. **Structure** — every object (Workflow, WorkflowTemplate, CronWorkflow, and the object
   each resource template creates) against the openAPIV3Schema of the installed CRDs
   (:mod:`gangway.lint.crds`), or, for a core Kubernetes kind (Service, ConfigMap, Job ...),
   its schema from ``kubernetes-validate`` (:mod:`gangway.lint.core_kinds`), unknown fields
   included; a kind neither knows is a warning.
2. **Semantics** Argo checks — names, template and task references, declared parameters, DAG
   cycles, retry policies, resource conditions (:mod:`gangway.lint.argo_rules`).
3. **Platform rules** — whole gangs, GPU type selection, Pod Security "restricted", secrets by
   reference (:mod:`gangway.lint.platform_rules`); a team's queue, priority classes and image
   registries, from the platform config (:mod:`gangway.lint.team_rules`). Skipped with
   ``platform=False`` (``gangway lint --no-platform``): then only what Argo and Kubernetes
   would refuse is reported.

A resource template's object (a Volcano Job, a Service ...) is checked as Argo would create
it: the template's placeholders are filled from the calling task's or step's arguments and the
workflow parameters' defaults.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gangway.argo.manifests import fill_manifest
from gangway.argo.scope import inputs_scope, parameter_values, workflow_scope, workflow_spec
from gangway.argo.substitution import fill_known
from gangway.config import PlatformConfig, load_config
from gangway.errors import PermanentError
from gangway.lint._findings import Finding
from gangway.lint.argo_rules import check_workflow
from gangway.lint.crds import CrdSchemas
from gangway.lint.platform_rules import check_gang, check_launch, check_pod
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
    if platform:
        findings += check_team(obj, name, config or load_config())
    spec = workflow_spec(obj)
    base = "spec.workflowSpec" if obj.get("kind") == "CronWorkflow" else "spec"
    for i, t in enumerate(spec.get("templates") or []):
        tp = f"{base}.templates[{i}]"
        if platform:
            findings += _check_template_pod(t, spec, tp, name)
        manifest = (t.get("resource") or {}).get("manifest")
        if manifest:
            labels = {
                **((obj.get("metadata") or {}).get("labels") or {}),
                **((spec.get("workflowMetadata") or {}).get("labels") or {}),
            }
            findings += _lint_resource(str(manifest), t, spec, labels, schemas, tp, platform)
    return _dedupe(findings)


def _check_template_pod(
    t: Mapping[str, Any], spec: Mapping[str, Any], tp: str, name: str
) -> list[Finding]:
    """The platform's pod rules for a container or script template, with the workflow's
    pod-level settings merged in as Argo merges them."""
    body = t.get("container") or t.get("script")
    if body is None:
        return []
    pod = {
        "securityContext": {
            **(spec.get("securityContext") or {}),
            **(t.get("securityContext") or {}),
        },
        "nodeSelector": {
            **(spec.get("nodeSelector") or {}),
            **(t.get("nodeSelector") or {}),
        },
        "volumes": [*(spec.get("volumes") or []), *(t.get("volumes") or [])],
    }
    key = "container" if "container" in t else "script"
    return check_pod([body], pod, tp, name, [f"{tp}.{key}"])


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
) -> list[Finding]:
    where = f"resource in template {template.get('name')}"
    scope = _lint_scope(template, spec, labels)
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
            findings += check_pod(containers, pod, path, name, paths)
            for c, cpath in zip(containers, paths, strict=True):
                findings += check_launch(c, cpath, name)
    return findings


def _lint_scope(
    template: Mapping[str, Any], spec: Mapping[str, Any], labels: Mapping[str, str]
) -> dict[str, str]:
    """Values Argo would substitute: the workflow parameters' values and the first calling
    task's or step's arguments (a plain stand-in for what is only known at run time: task outputs,
    items)."""
    scope = workflow_scope(
        name="lint-workflow",
        uid="00000000-0000-0000-0000-0",
        namespace="default",
        parameters=parameter_values(spec),
        labels=labels,
    )
    inputs = {
        p["name"]: str(p.get("value", p.get("default", "x")))
        for p in (template.get("inputs") or {}).get("parameters") or []
    }
    caller = next(_callers(spec, str(template.get("name"))), None)
    for a in ((caller or {}).get("arguments") or {}).get("parameters") or []:
        inputs[a["name"]] = fill_known(str(a.get("value", "")), scope, "placeholder")
    return {**scope, **inputs_scope(inputs)}


def _callers(spec: Mapping[str, Any], template: str) -> Iterator[Mapping[str, Any]]:
    """The DAG tasks and steps that call ``template``, in the order they are written."""
    for t in spec.get("templates") or []:
        steps = [s for group in t.get("steps") or [] for s in group or []]
        for call in [*((t.get("dag") or {}).get("tasks") or []), *steps]:
            if isinstance(call, Mapping) and call.get("template") == template:
                yield call
