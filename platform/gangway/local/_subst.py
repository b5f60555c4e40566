"""Argo variable substitution, done the way Argo does it, and refusing what it cannot do.

``{{name}}`` is replaced by the value of ``name`` in the scope (``workflow.name``,
``workflow.uid``, ``workflow.parameters.x``, ``inputs.parameters.x``,
``tasks.t.outputs.parameters.y``, ``item``, ``item.key``); ``{{=expr}}`` is evaluated with
:mod:`gangway.local._expr`. An unknown variable is an error naming it and where it was used,
never a silent pass-through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gangway.local._expr import evaluate
from gangway.local._model import UnsupportedConstruct

__all__ = ["SCRATCH", "map_scratch", "substitute", "substitute_tree"]

SCRATCH = "/gangway"
"""Per-step scratch space in a compiled template; locally a directory per step attempt."""

_VAR = re.compile(r"\{\{\s*(=?)(.*?)\s*\}\}", re.S)


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

    return _VAR.sub(one, text)


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


HERA_OUTPUTS = "/tmp/hera-outputs"
"""Where Hera's runner scripts write output parameters; per step attempt locally, too."""


def map_scratch(text: str, scratch: Path) -> str:
    """Point ``/gangway/...`` (as a whole argument or after ``=``) and Hera's outputs directory
    at directories of this step attempt."""
    if text == HERA_OUTPUTS or text.startswith(HERA_OUTPUTS + "/"):
        return str(scratch) + "/hera-outputs" + text[len(HERA_OUTPUTS) :]
    if text == SCRATCH or text.startswith(SCRATCH + "/"):
        return str(scratch) + text[len(SCRATCH) :]
    return text.replace("=" + SCRATCH + "/", f"={scratch}/")


def parameters_json(params: Mapping[str, str]) -> str:
    """Argo's ``{{workflow.parameters.json}}``: every workflow parameter as a JSON list."""
    return json.dumps([{"name": k, "value": v} for k, v in params.items()])
