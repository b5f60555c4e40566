"""Argo's ``spec.templateDefaults``, merged into a template as Argo merges it before it runs
the template (``mergedTemplateDefaultsInto``: a strategic merge, the template's own values
winning — maps key by key, the ``sidecars`` and ``initContainers`` lists entry by entry by
``name``, other lists replaced — then the template's type set again, so a type-specific
default such as ``container`` only reaches a template of that type). One reading for the
local executor (:mod:`gangway.local`) and the linter (:mod:`gangway.lint`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["NAMED_LISTS", "TYPES", "merge_defaults"]

TYPES = (
    *("container", "containerSet", "script", "resource", "dag", "steps", "suspend"),
    *("data", "http", "plugin"),
)
"""Argo's template types: a template has one of these fields."""
NAMED_LISTS = ("sidecars", "initContainers")
"""Template lists Argo's strategic merge merges entry by entry, by ``name``."""


def _merge(default: Any, own: Any) -> Any:
    if isinstance(default, Mapping) and isinstance(own, Mapping):
        return {k: _merge(default.get(k), own[k]) if k in default else own[k] for k in own} | {
            k: v for k, v in default.items() if k not in own
        }
    return default if own is None else own


def _merge_named(default: list[Any], own: list[Any]) -> list[Any]:
    mine = {c.get("name"): c for c in own if isinstance(c, Mapping)}
    merged = [_merge(c, mine.get(c.get("name"))) for c in default if isinstance(c, Mapping)]
    theirs = {c.get("name") for c in default if isinstance(c, Mapping)}
    return merged + [c for c in own if not isinstance(c, Mapping) or c.get("name") not in theirs]


def merge_defaults(defaults: Mapping[str, Any], t: Mapping[str, Any]) -> dict[str, Any]:
    """``t`` as Argo runs it: ``defaults`` (``spec.templateDefaults``) merged in."""
    kind = next((k for k in TYPES if k in t), None)
    base = {k: v for k, v in defaults.items() if k not in TYPES or k == kind}
    out: dict[str, Any] = _merge(base, t)
    for key in NAMED_LISTS:
        if key in defaults and key in t:
            out[key] = _merge_named(list(defaults[key] or []), list(t[key] or []))
    return out
