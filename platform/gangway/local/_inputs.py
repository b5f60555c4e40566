"""What a DAG task passes on: the items it fans out over, and its template's inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gangway.argo.substitution import substitute
from gangway.errors import PermanentError
from gangway.local._model import NodeResult

__all__ = ["task_items", "template_inputs"]


def task_items(task: Mapping[str, Any], scope: Mapping[str, str]) -> list[Any] | None:
    """The items a task fans out over (``withItems``, ``withParam``), or None."""
    if "withItems" in task:
        return list(task["withItems"])
    if "withParam" not in task:
        return None
    where = f"task {task['name']}"
    raw = substitute(str(task["withParam"]), scope, where=f"{where}.withParam")
    try:
        items = json.loads(raw)
    except ValueError:
        raise PermanentError(f"{where}: withParam is not a JSON list: {raw[:200]}") from None
    if not isinstance(items, list):
        raise PermanentError(f"{where}: withParam must be a JSON list, got {raw[:200]}")
    return items


def template_inputs(
    task: Mapping[str, Any],
    template: Mapping[str, Any],
    scope: Mapping[str, str],
    node: NodeResult,
) -> dict[str, str]:
    """The template's input parameters: the task's arguments, else their defaults."""
    args = {
        p["name"]: substitute(str(p.get("value", "")), scope, where=f"task {node.name}")
        for p in (task.get("arguments") or {}).get("parameters", [])
    }
    inputs: dict[str, str] = {}
    for p in (template.get("inputs") or {}).get("parameters", []):
        if p["name"] in args:
            inputs[p["name"]] = args[p["name"]]
        elif "value" in p or "default" in p:
            inputs[p["name"]] = str(p.get("value", p.get("default")))
        else:
            raise PermanentError(f"task {node.name}: input parameter {p['name']!r} has no value")
    return inputs
