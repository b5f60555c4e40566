"""What a task or step passes on: the items it fans out over, and its template's inputs
(parameters, and artifacts by reference)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gangway.argo.substitution import absent_output, substitute
from gangway.errors import PermanentError, UnsupportedConstruct

__all__ = [
    "RAW_REFERENCE",
    "artifact_references",
    "sequence_items",
    "task_items",
    "template_artifacts",
    "template_inputs",
]

RAW_REFERENCE = "raw:"
"""How ``{{inputs.artifacts.X}}`` refers to a ``raw`` artifact (its data after this prefix) in
a local run's scope, so that ``from: "{{inputs.artifacts.X}}"`` passes it on as Argo passes
the artifact itself; every other reference is the URI where the artifact is stored."""


def artifact_references(arts: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """``inputs.artifacts.NAME`` for each input artifact of a template: its reference."""
    return {
        f"inputs.artifacts.{k}": v if how == "uri" else f"{RAW_REFERENCE}{v}"
        for k, (how, v) in arts.items()
    }


def task_items(task: Mapping[str, Any], scope: Mapping[str, str]) -> list[Any] | None:
    """The items a task fans out over (``withItems``, ``withParam``, ``withSequence``), or
    None."""
    where = f"task {task['name']}"
    if "withItems" in task:
        return [_filled(i, scope, where) for i in task["withItems"]]
    if "withSequence" in task:
        seq = {
            k: substitute(str(v), scope, where=f"{where}.withSequence")
            for k, v in task["withSequence"].items()
        }
        return sequence_items(seq, where)
    if "withParam" not in task:
        return None
    raw = substitute(str(task["withParam"]), scope, where=f"{where}.withParam")
    try:
        items = json.loads(raw)
    except ValueError:
        raise PermanentError(f"{where}: withParam is not a JSON list: {raw[:200]}") from None
    if not isinstance(items, list):
        raise PermanentError(f"{where}: withParam must be a JSON list, got {raw[:200]}")
    return items


def _filled(item: Any, scope: Mapping[str, str], where: str) -> Any:
    if isinstance(item, str):
        return substitute(item, scope, where=f"{where}.withItems")
    return item


def sequence_items(seq: Mapping[str, str], where: str) -> list[str]:
    """Argo's ``withSequence``: ``count`` (from ``start``, default 0) or ``start``..``end``
    inclusive (counting down when end < start), each formatted by ``format`` (printf)."""
    try:
        start = int(seq.get("start") or 0)
        if seq.get("count") not in (None, ""):
            if seq.get("end") not in (None, ""):
                raise PermanentError(f"{where}.withSequence: give count or end, not both")
            count = int(seq["count"])
            numbers = list(range(start, start + count))
        else:
            end = int(seq.get("end") or 0)
            step = 1 if end >= start else -1
            numbers = list(range(start, end + step, step))
    except ValueError as e:
        raise PermanentError(f"{where}.withSequence: not an integer: {e}") from None
    fmt = seq.get("format")
    if not fmt:
        return [str(n) for n in numbers]
    try:
        return [fmt % n for n in numbers]
    except (TypeError, ValueError) as e:
        raise PermanentError(f"{where}.withSequence.format {fmt!r}: {e}") from None


_PURE_REFERENCE = re.compile(r"\{\{\s*([^{}=][^{}]*?)\s*\}\}")


def template_inputs(
    task: Mapping[str, Any], template: Mapping[str, Any], scope: Mapping[str, str], name: str
) -> dict[str, str]:
    """The template's input parameters: the task's arguments, else their defaults. An
    argument that is only a reference to an absent output (of a task that did not run, with
    no default) is not given when its input has a default, as Argo drops it."""
    defaulted = {
        p["name"] for p in (template.get("inputs") or {}).get("parameters") or [] if "default" in p
    }
    args = {}
    for p in (task.get("arguments") or {}).get("parameters") or []:
        raw = str(p.get("value", ""))
        ref = _PURE_REFERENCE.fullmatch(raw)
        if p["name"] in defaulted and ref and absent_output(ref.group(1), scope) is not None:
            continue
        args[p["name"]] = substitute(raw, scope, where=f"task {name}")
    inputs: dict[str, str] = {}
    for p in (template.get("inputs") or {}).get("parameters") or []:
        if p["name"] in args:
            inputs[p["name"]] = args[p["name"]]
        elif "value" in p or "default" in p:
            inputs[p["name"]] = substitute(
                str(p.get("value", p.get("default"))), scope, where=f"task {name}"
            )
        else:
            raise PermanentError(f"task {name}: input parameter {p['name']!r} has no value")
    return inputs


def template_artifacts(
    task: Mapping[str, Any], template: Mapping[str, Any], scope: Mapping[str, str], name: str
) -> dict[str, tuple[str, str]]:
    """The template's input artifacts: name → ``("uri", URI)`` (from an argument's ``from``,
    a reference to an earlier output) or ``("raw", data)``; an optional one with no source is
    left out."""
    where = f"task {name}"
    args = {str(a["name"]): a for a in (task.get("arguments") or {}).get("artifacts") or []}
    out: dict[str, tuple[str, str]] = {}
    for spec in (template.get("inputs") or {}).get("artifacts") or []:
        art = str(spec["name"])
        source = {**spec, **args.get(art, {})}
        if source.get("from") or source.get("fromExpression"):
            ref = str(source.get("from") or "{{=" + str(source["fromExpression"]) + "}}")
            try:
                uri = substitute(ref, scope, where=f"{where}: artifact {art}")
                raw = uri.startswith(RAW_REFERENCE)
                out[art] = ("raw", uri[len(RAW_REFERENCE) :]) if raw else ("uri", uri)
            except UnsupportedConstruct:
                if not (spec.get("optional") or source.get("optional")):
                    raise
                # Argo: an optional artifact that was not produced is not available as an input

        elif "raw" in source:
            data = str((source["raw"] or {}).get("data", ""))
            out[art] = ("raw", substitute(data, scope, where=f"{where}: artifact {art}"))
        elif not spec.get("optional"):
            raise PermanentError(
                f"{where}: input artifact {art!r} has no source (from, or raw data)"
            )
    return out
