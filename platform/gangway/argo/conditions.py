"""Argo resource success/failure conditions (``status.state.phase == Completed``), parsed for
the forms Gangway emits; anything else is refused. (DAG ``depends`` clauses:
:mod:`gangway.argo.depends`.)"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gangway.errors import UnsupportedConstruct

__all__ = ["resource_condition", "split_requirements"]

_COND = re.compile(r"^\s*([\w.]+)\s*(==|!=|=|in|notin)\s*(.+?)\s*$")


def _lookup(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def split_requirements(condition: str) -> list[str]:
    """Split at the commas outside parentheses (``phase in (Failed,Aborted)`` is one)."""
    out, depth, cur = [], 0, ""
    for ch in condition:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def resource_condition(condition: str, obj: Mapping[str, Any]) -> bool:
    """Evaluate comma-separated ``key op value`` requirements on ``obj`` (all must hold)."""
    for req in split_requirements(condition):
        m = _COND.match(req)
        if m is None:
            raise UnsupportedConstruct(f"resource condition {condition!r} is not supported locally")
        key, op, raw = m.groups()
        actual = str(_lookup(obj, key))
        if op in ("in", "notin"):
            inside = {v.strip() for v in raw.strip().strip("()").split(",")}
            if (op == "in") != (actual in inside):
                return False
        elif (actual == raw.strip()) != (op in ("==", "=")):
            return False
    return True
