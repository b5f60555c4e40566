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

from gangway.argo.expressions import expand_expression
from gangway.errors import PermanentError, UnsupportedConstruct

__all__ = ["NOT_RUN", "PLACEHOLDER", "absent_output", "fill_known", "substitute", "substitute_tree"]

PLACEHOLDER = re.compile(r"\{\{\s*(=?)(.*?)\s*\}\}", re.S)
"""``{{name}}`` or ``{{=expression}}``: group 1 is ``=`` for an expression, group 2 the body."""


def substitute(text: str, scope: Mapping[str, str], *, where: str) -> str:
    """Replace every ``{{...}}`` in ``text`` from ``scope``."""

    def one(m: re.Match[str]) -> str:
        is_expr, body = m.group(1), m.group(2)
        if is_expr:
            return expand_expression(body, scope)
        if body not in scope:
            if (absent := absent_output(body, scope)) is not None:
                raise PermanentError(f"{where}: {absent}")
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


NOT_RUN = ("Skipped", "Omitted")
_OUTPUT_REF = re.compile(r"(tasks|steps)\.([\w-]+)\.outputs\.(parameters\.[\w-]+|result)")


def absent_output(name: str, scope: Mapping[str, str]) -> str | None:
    """Why ``name`` is not in ``scope`` when it is an output of a task or step that did not
    run (Skipped or Omitted) and has no ``valueFrom.default``: Argo's absent optional, which
    fails the node that refers to it; None for any other name."""
    m = _OUTPUT_REF.fullmatch(name)
    if not m:
        return None
    kind, task, what = m.groups()
    phase = scope.get(f"{kind}.{task}.status")
    if phase not in NOT_RUN:
        return None
    if what == "result":
        why = "it has no outputs.result (it did not run)"
    else:
        why = f"its template gives {what.split('.', 1)[1]!r} no valueFrom.default"
    return (
        f"{{{{{name}}}}} is an absent optional: {kind[:-1]} {task} was {phase} and {why}; "
        "Argo fails the node that refers to it (give the output a valueFrom.default, or the "
        "input it is passed to a default)"
    )


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
            return expand_expression(m.group(2), scope)
        except Exception:  # an unknown variable, a value only a run has: not ours to judge
            return default

    return PLACEHOLDER.sub(one, text)
