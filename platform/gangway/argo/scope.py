"""The variables Argo puts in scope for ``{{…}}``: a workflow's, a template's inputs, the
outputs of earlier tasks, and a fanned-out item — built one way for every reader
(the local executor runs with them; ``gangway lint`` fills manifests with stand-ins)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from gangway.argo.substitution import PLACEHOLDER, fill_known

__all__ = [
    "POD_TEMPLATE_TYPES",
    "aggregate_scope",
    "callers",
    "inputs_scope",
    "item_scope",
    "node_scope",
    "parameter_values",
    "parameters_json",
    "skipped_outputs",
    "static_scope",
    "workflow_scope",
    "workflow_spec",
]


def workflow_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Workflow spec of a Workflow/WorkflowTemplate, or of a CronWorkflow's template."""
    spec = dict(obj.get("spec") or {})
    if obj.get("kind") == "CronWorkflow":
        return dict(spec.get("workflowSpec") or {})
    return spec


def parameter_values(spec: Mapping[str, Any]) -> dict[str, str]:
    """The workflow parameters (``spec.arguments.parameters``): each one's value, else its
    default."""
    return {
        str(p["name"]): str(p.get("value", p.get("default", "")))
        for p in (spec.get("arguments") or {}).get("parameters") or []
    }


def parameters_json(params: Mapping[str, str]) -> str:
    """Argo's ``{{workflow.parameters.json}}`` (and ``{{inputs.parameters}}``): every
    parameter as a JSON list of ``{name, value}``."""
    return json.dumps([{"name": k, "value": v} for k, v in params.items()])


def workflow_scope(
    *,
    name: str,
    uid: str,
    namespace: str,
    parameters: Mapping[str, str],
    labels: Mapping[str, Any] | None = None,
    service_account: str | None = None,
) -> dict[str, str]:
    """``workflow.*``: name, uid, namespace, service account, parameters (one by one and as
    JSON) and labels."""
    scope = {"workflow.name": name, "workflow.uid": uid, "workflow.namespace": namespace}
    if service_account is not None:
        scope["workflow.serviceAccountName"] = service_account
    scope.update({f"workflow.parameters.{k}": v for k, v in parameters.items()})
    scope["workflow.parameters.json"] = parameters_json(parameters)
    scope.update({f"workflow.labels.{k}": str(v) for k, v in (labels or {}).items()})
    return scope


def inputs_scope(inputs: Mapping[str, str]) -> dict[str, str]:
    """``inputs.parameters.NAME`` for each input, and ``inputs.parameters`` (all, as JSON)."""
    scope = {f"inputs.parameters.{k}": v for k, v in inputs.items()}
    scope["inputs.parameters"] = parameters_json(inputs)
    return scope


def item_scope(item: Any) -> dict[str, str]:
    """``item`` (and ``item.KEY`` for a mapping) of one ``withItems``/``withParam`` item."""
    if isinstance(item, dict):
        scope = {f"item.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in item.items()}
        scope["item"] = json.dumps(item)
        return scope
    return {"item": item if isinstance(item, str) else json.dumps(item)}


def node_scope(
    prefix: str,
    *,
    phase: str,
    node_id: str,
    outputs: Mapping[str, str],
    result: str | None = None,
    exit_code: int | None = None,
    artifacts: Mapping[str, str] | None = None,
    daemoned: bool = False,
) -> dict[str, str]:
    """What a task or step that ended puts in scope for the ones after it, under ``prefix``
    (``tasks.NAME`` or ``steps.NAME``): ``status``, ``id``, ``exitCode``, ``ip`` of a daemon,
    ``outputs.parameters`` (each, and all as JSON), ``outputs.result`` and
    ``outputs.artifacts.NAME`` (a reference: the artifact's URI)."""
    scope = {f"{prefix}.status": phase, f"{prefix}.id": node_id}
    if exit_code is not None:
        scope[f"{prefix}.exitCode"] = str(exit_code)
        scope[f"{prefix}.outputs.exitCode"] = str(exit_code)
    if daemoned:
        scope[f"{prefix}.ip"] = "127.0.0.1"
    scope.update({f"{prefix}.outputs.parameters.{k}": v for k, v in outputs.items()})
    scope[f"{prefix}.outputs.parameters"] = json.dumps(dict(outputs))
    if result is not None:
        scope[f"{prefix}.outputs.result"] = result
    scope.update({f"{prefix}.outputs.artifacts.{k}": v for k, v in (artifacts or {}).items()})
    return scope


def skipped_outputs(template: Mapping[str, Any]) -> dict[str, str]:
    """The outputs a Skipped or Omitted task or step has in Argo's scope: each output
    parameter's ``valueFrom.default``. An output without one is absent: a reference to it
    fails its node, unless it is the whole value of an argument whose input has a default
    (which it then gets)."""
    return {
        str(p["name"]): str((p.get("valueFrom") or {})["default"])
        for p in (template.get("outputs") or {}).get("parameters") or []
        if "default" in (p.get("valueFrom") or {})
    }


def aggregate_scope(prefix: str, phase: str, node_id: str, children: list[Any]) -> dict[str, str]:
    """:func:`node_scope` of a fanned-out task, as Argo aggregates its items (those that
    succeeded): ``outputs.parameters.NAME`` a JSON list of values, ``outputs.parameters`` a
    JSON list of each item's parameters, ``outputs.result`` a JSON list of results (each
    read as JSON when it is)."""
    ok = [c for c in children if c.phase == "Succeeded"]
    names = list(dict.fromkeys(k for c in ok for k in c.outputs))
    scope = {f"{prefix}.status": phase, f"{prefix}.id": node_id}
    scope.update(
        {
            f"{prefix}.outputs.parameters.{k}": json.dumps(
                [c.outputs[k] for c in ok if k in c.outputs]
            )
            for k in names
        }
    )
    scope[f"{prefix}.outputs.parameters"] = json.dumps([c.outputs for c in ok if c.outputs])
    results = [_as_item(c.result) for c in ok if c.result is not None]
    scope[f"{prefix}.outputs.result"] = json.dumps(results)
    return scope


def _as_item(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def static_scope(
    template: Mapping[str, Any],
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    *,
    stand_ins: bool = True,
) -> dict[str, str]:
    """Values Argo would substitute: the workflow parameters' values and the first calling
    task's or step's arguments, with a plain stand-in for what is only known at run time (task
    outputs, items) — or, with ``stand_ins=False``, without the inputs that depend on it."""
    scope = workflow_scope(
        name="static-workflow",
        uid="00000000-0000-0000-0000-0",
        namespace="default",
        parameters=parameter_values(spec),
        labels=labels,
    )
    inputs = {
        p["name"]: str(p.get("value", p.get("default", "x")))
        for p in (template.get("inputs") or {}).get("parameters") or []
        if stand_ins or "value" in p or "default" in p
    }
    caller = next(callers(spec, str(template.get("name"))), None)
    for a in ((caller or {}).get("arguments") or {}).get("parameters") or []:
        raw = str(a.get("value", ""))
        known = all(not m.group(1) and m.group(2) in scope for m in PLACEHOLDER.finditer(raw))
        if stand_ins or known:
            inputs[a["name"]] = fill_known(raw, scope, "placeholder")
    if any(k in template for k in POD_TEMPLATE_TYPES):  # Argo's pod types have {{pod.name}}
        scope["pod.name"] = "static-workflow-pod"
    return {**scope, **inputs_scope(inputs)}


POD_TEMPLATE_TYPES = ("container", "containerSet", "script", "resource", "data")
"""The template types Argo runs in a pod of their own (a resource template's pod runs the
executor's kubectl): their fields may say ``{{pod.name}}``."""


def callers(spec: Mapping[str, Any], template: str) -> Iterator[Mapping[str, Any]]:
    """The DAG tasks and steps that call ``template``, in the order they are written."""
    for t in spec.get("templates") or []:
        steps = [s for group in t.get("steps") or [] for s in group or []]
        for call in [*((t.get("dag") or {}).get("tasks") or []), *steps]:
            if isinstance(call, Mapping) and call.get("template") == template:
                yield call
