"""The Workflow a WorkflowTemplate becomes when it is submitted: what a local run executes."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from gangway.errors import PermanentError
from gangway.workflows.compiler import check_parameter_names

__all__ = ["workflow_from_template", "workflow_name"]

_GENERATED = "bcdfghjklmnpqrstvwxz2456789"
"""The characters Kubernetes appends to a ``generateName`` (``k8s.io/apimachinery``
``util/rand``: no vowels, no look-alikes)."""


def workflow_from_template(
    template: Mapping[str, Any],
    overrides: Mapping[str, str] | None = None,
    *,
    uid: str | None = None,
) -> dict[str, Any]:
    """The Workflow that submitting ``template`` with ``overrides`` would create; for a
    CronWorkflow, the one it creates each time it fires (run once)."""
    kind = template.get("kind")
    if kind not in ("WorkflowTemplate", "Workflow", "CronWorkflow"):
        raise PermanentError(f"expected a WorkflowTemplate or Workflow, got {kind}")
    spec = json.loads(json.dumps(template.get("spec", {})))
    if kind == "CronWorkflow":
        spec = spec.get("workflowSpec") or {}
        ref = (spec.get("workflowTemplateRef") or {}).get("name")
        if ref:
            raise PermanentError(
                f"CronWorkflow {template.get('metadata', {}).get('name')!r} runs the "
                f"WorkflowTemplate {ref!r}: run the pipeline file that defines both"
            )
    params = spec.setdefault("arguments", {}).setdefault("parameters", [])
    known = {p["name"]: p for p in params}
    check_parameter_names(dict(template), overrides or {})
    for name, value in (overrides or {}).items():
        known[name]["value"] = str(value)
    meta = {
        "name": workflow_name(template.get("metadata") or {}),
        "uid": uid or str(uuid.uuid4()),
        "labels": dict(template.get("metadata", {}).get("labels", {})),
        "annotations": dict(template.get("metadata", {}).get("annotations", {})),
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta,
        "spec": spec,
    }


def workflow_name(meta: Mapping[str, Any]) -> str:
    """The name of the run: a ``generateName`` and 5 random characters, as the API server
    makes it (the prefix cut to 58 characters); a named object's name and a random suffix,
    so every run here has a record of its own."""
    if meta.get("name"):
        return f"{meta['name']}-{secrets.token_hex(3)}"
    prefix = str(meta.get("generateName") or "workflow-")[:58]
    return prefix + "".join(secrets.choice(_GENERATED) for _ in range(5))
