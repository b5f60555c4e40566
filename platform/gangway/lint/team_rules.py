"""Team rules, from the platform config: a workflow of a team runs on the team's queue, with
a priority class the team may use and an image from an allowed registry. The admission
policies (:mod:`gangway.render.admission_policies`) enforce the same on the cluster."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gangway.argo.scope import workflow_spec
from gangway.config import PlatformConfig
from gangway.contract import PRIORITY_CLASS_PARAM, QUEUE_LABEL, TEAM_LABEL
from gangway.errors import FieldError
from gangway.lint._findings import finding

__all__ = ["check_team"]

IMAGE_PARAM = "image"


def check_team(obj: Mapping[str, Any], name: str, cfg: PlatformConfig) -> list[FieldError]:
    """Findings for a workflow labelled with a team (others are not Gangway's to judge)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    team = labels.get(TEAM_LABEL)
    if not team:
        return []
    views = cfg.team_views()
    if team not in views:
        known = ", ".join(views)
        return [
            finding(
                name,
                f"metadata.labels.{TEAM_LABEL}",
                f"team {team!r} is not in the platform config; teams: {known}",
            )
        ]
    view = views[team]
    out = []
    if labels.get(QUEUE_LABEL, view.queue) != view.queue:
        out.append(
            finding(
                name,
                f"metadata.labels.{QUEUE_LABEL}",
                f"is {labels[QUEUE_LABEL]!r}; team {team}'s queue is {view.queue!r}",
            )
        )
    return out + list(_parameters(obj, name, view.priority_classes, cfg.registries))


def _parameters(
    obj: Mapping[str, Any], name: str, allowed: list[str], registries: list[str]
) -> Iterator[FieldError]:
    base = "spec.workflowSpec" if obj.get("kind") == "CronWorkflow" else "spec"
    params = (workflow_spec(obj).get("arguments") or {}).get("parameters") or []
    for i, p in enumerate(params):
        value, path = str(p.get("value", "")), f"{base}.arguments.parameters[{i}].value"
        if "{{" in value:
            continue
        if p.get("name") == PRIORITY_CLASS_PARAM and value not in allowed:
            yield finding(
                name,
                path,
                f"priority class {value!r} is not allowed for this team; use one of "
                + ", ".join(allowed),
            )
        if p.get("name") == IMAGE_PARAM and not any(value.startswith(r) for r in registries):
            yield finding(
                name,
                path,
                f"image {value!r} is not from an allowed registry (" + ", ".join(registries) + ")",
            )
