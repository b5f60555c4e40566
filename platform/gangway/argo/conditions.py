"""Argo resource success/failure conditions (``status.state.phase == Completed``) and DAG
``depends`` clauses, parsed for the forms Gangway emits; anything else is refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gangway.argo.errors import UnsupportedConstruct

__all__ = ["depends_on", "resource_condition"]

_COND = re.compile(r"^\s*([\w.]+)\s*(==|!=|=|in|notin)\s*(.+?)\s*$")
_DEP = re.compile(
    r"^([A-Za-z0-9][\w-]*)(?:\.(Succeeded|Failed|Errored|Skipped|Omitted|Daemoned))?$"
)
SATISFIED_BY_NAME = {"Succeeded", "Skipped", "Daemoned"}


def _lookup(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _split_requirements(condition: str) -> list[str]:
    # "status.state.phase in (Failed,Aborted)" contains commas inside parentheses
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


def depends_on(clause: str, *, where: str) -> dict[str, set[str]]:
    """``"a && b.Succeeded"`` → ``{"a": {Succeeded, Skipped, Daemoned}, "b": {Succeeded}}``."""
    out: dict[str, set[str]] = {}
    for term in clause.split("&&"):
        m = _DEP.match(term.strip())
        if m is None:
            raise UnsupportedConstruct(
                f"{where}: depends {clause!r} — only 'a && b' and 'a.Succeeded'-style terms "
                "are supported locally (no ||, !, or parentheses)"
            )
        out[m.group(1)] = {m.group(2)} if m.group(2) else set(SATISFIED_BY_NAME)
    return out


def resource_condition(condition: str, obj: Mapping[str, Any]) -> bool:
    """Evaluate comma-separated ``key op value`` requirements on ``obj`` (all must hold)."""
    for req in _split_requirements(condition):
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
