"""The variables Argo puts in scope for ``{{…}}``: a workflow's, a template's inputs, the
outputs of earlier tasks, and a fanned-out item — built one way for every reader
(the local executor runs with them; ``gangway lint`` fills manifests with stand-ins)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "inputs_scope",
    "item_scope",
    "parameter_values",
    "parameters_json",
    "task_outputs_scope",
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


def task_outputs_scope(outputs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``tasks.TASK.outputs.parameters.NAME`` for the outputs of the tasks that ended."""
    return {
        f"tasks.{task}.outputs.parameters.{k}": v
        for task, outs in outputs.items()
        for k, v in outs.items()
    }


def item_scope(item: Any) -> dict[str, str]:
    """``item`` (and ``item.KEY`` for a mapping) of one ``withItems``/``withParam`` item."""
    if isinstance(item, dict):
        scope = {f"item.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in item.items()}
        scope["item"] = json.dumps(item)
        return scope
    return {"item": item if isinstance(item, str) else json.dumps(item)}
