"""A workflow's state as a user reads it: steps, phases, durations, retries, the gang's Job.

Pure functions over the Workflow object the Argo API returns; the CLI only renders them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["StepState", "WorkflowState", "summarize"]

_HIDDEN_TYPES = {"DAG", "Steps", "StepGroup", "TaskGroup"}


@dataclass(frozen=True)
class StepState:
    name: str
    template: str
    phase: str
    seconds: float | None
    attempts: int
    message: str
    outputs: dict[str, str]


@dataclass(frozen=True)
class WorkflowState:
    name: str
    namespace: str
    phase: str
    seconds: float | None
    message: str
    steps: list[StepState]


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _seconds(node: Mapping[str, Any]) -> float | None:
    start, end = _ts(node.get("startedAt")), _ts(node.get("finishedAt"))
    return (end - start).total_seconds() if start and end else None


def summarize(workflow: Mapping[str, Any]) -> WorkflowState:
    """One row per task (a retried task is one row with its attempts), in start order."""
    meta, status = workflow.get("metadata") or {}, workflow.get("status") or {}
    nodes: Mapping[str, Any] = status.get("nodes") or {}
    child_of_retry = {
        c for n in nodes.values() if n.get("type") == "Retry" for c in n.get("children") or []
    }
    rows = []
    for node in sorted(nodes.values(), key=lambda n: (n.get("startedAt") or "", n.get("name"))):
        if node.get("type") in _HIDDEN_TYPES or node.get("id") in child_of_retry:
            continue
        attempts = len(node.get("children") or []) if node.get("type") == "Retry" else 1
        if node.get("type") == "Skipped":
            attempts = 0
        params = (node.get("outputs") or {}).get("parameters") or []
        rows.append(
            StepState(
                name=str(node.get("displayName") or node.get("name")),
                template=str(node.get("templateName", "")),
                phase=str(node.get("phase", "Pending")),
                seconds=_seconds(node),
                attempts=attempts,
                message=str(node.get("message", "")),
                outputs={p["name"]: str(p.get("value", "")) for p in params},
            )
        )
    return WorkflowState(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        phase=str(status.get("phase", "Pending")),
        seconds=_seconds(status),
        message=str(status.get("message", "")),
        steps=rows,
    )
