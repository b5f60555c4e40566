"""Argo variable substitution, done the way Argo does it, and refusing what it cannot do.

``{{name}}`` is replaced by the value of ``name`` in the scope (``workflow.name``,
``workflow.uid``, ``workflow.parameters.x``, ``inputs.parameters.x``,
``tasks.t.outputs.parameters.y``, ``item``, ``item.key``; see :mod:`gangway.argo.scope`);
``{{=expr}}`` is evaluated with :mod:`gangway.argo.expressions`. An unknown variable is an
error naming it and where it was used, never a silent pass-through. Resource manifests are
filled by :func:`gangway.argo.manifests.fill_manifest`, which also checks their structure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gangway.argo.errors import UnsupportedConstruct
from gangway.argo.expressions import evaluate

__all__ = ["PLACEHOLDER", "fill_known", "substitute", "substitute_tree"]

PLACEHOLDER = re.compile(r"\{\{\s*(=?)(.*?)\s*\}\}", re.S)
"""``{{name}}`` or ``{{=expression}}``: group 1 is ``=`` for an expression, group 2 the body."""


def substitute(text: str, scope: Mapping[str, str], *, where: str) -> str:
    """Replace every ``{{...}}`` in ``text`` from ``scope``."""

    def one(m: re.Match[str]) -> str:
        is_expr, body = m.group(1), m.group(2)
        if is_expr:
            value = evaluate(body, scope)
            return str(value).lower() if isinstance(value, bool) else str(value)
        if body not in scope:
            raise UnsupportedConstruct(
                f"{where}: unknown variable {{{{{body}}}}}; known here: "
                + ", ".join(sorted(_families(scope)))
            )
        return scope[body]

    return PLACEHOLDER.sub(one, text)


def substitute_tree(obj: Any, scope: Mapping[str, str], *, where: str) -> Any:
    """Substitute in every string of a JSON-like tree."""
    if isinstance(obj, str):
        return substitute(obj, scope, where=where)
    if isinstance(obj, list):
        return [substitute_tree(v, scope, where=where) for v in obj]
    if isinstance(obj, dict):
        return {k: substitute_tree(v, scope, where=f"{where}.{k}") for k, v in obj.items()}
    return obj


def _families(scope: Mapping[str, str]) -> set[str]:
    out = set()
    for key in scope:
        parts = key.split(".")
        out.add(".".join(parts[:-1]) + ".*" if len(parts) > 1 else key)
    return out


def fill_known(text: str, scope: Mapping[str, str], default: str) -> str:
    """Replace each ``{{name}}`` that ``scope`` knows, and each ``{{=expression}}`` over what
    it knows; anything else (an unknown name, an expression that does not evaluate) becomes
    ``default`` — a plain stand-in for what only a run would know."""

    def one(m: re.Match[str]) -> str:
        if not m.group(1):
            return scope.get(m.group(2), default)
        try:
            value = evaluate(m.group(2), scope)
        except Exception:  # an unknown variable, a value only a run has: not ours to judge
            return default
        return str(value).lower() if isinstance(value, bool) else str(value)

    return PLACEHOLDER.sub(one, text)
