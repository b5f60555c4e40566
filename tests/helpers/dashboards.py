"""What the rendered Grafana dashboards ask Prometheus: every panel query and variable query,
the metric names in a PromQL expression, and the values the dashboards' variables stand for."""

from __future__ import annotations

import re
from typing import Any

from gangway.config import EXAMPLE, load_config
from gangway.render.dashboards import dashboards
from gangway.render.grafana import dashboard_json

_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def rendered() -> dict[str, dict[str, Any]]:
    """The example config's dashboards as Grafana JSON, by uid."""
    return {uid: dashboard_json(d) for uid, d in dashboards(load_config(EXAMPLE)).items()}


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, PromQL)`` of every panel target and every query variable of ``board``; a
    ``label_values(SELECTOR, LABEL)`` variable gives its selector."""
    found = [
        (f"{board['uid']} / {p['title']} / {t['refId']}", t["expr"])
        for p in board.get("panels", [])
        for t in p.get("targets", [])
    ]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            m = _LABEL_VALUES.match(v["query"])
            assert m, f"{board['uid']}: variable {v['name']}: not label_values(...): {v['query']}"
            found.append((f"{board['uid']} / variable {v['name']}", m["selector"]))
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (strings, label matchers, ranges, grouping clauses,
    functions and keywords left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = _GROUPING.sub(" ", e)
    names = set()
    for m in re.finditer(r"(?<![\w$.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end() :].lstrip()
        if not rest.startswith("(") and m.group() not in _KEYWORDS:
            names.add(m.group())
    return names


def stored(spec: Any, prefix: str = "") -> set[str]:
    """The names Prometheus stores for a declared metric (a histogram's three series)."""
    name = prefix + spec.name
    if spec.kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return {name}


def substituted(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's variables (``$name``, ``${name}``) replaced by ``values``."""
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in expr, f"a variable left: {expr}"
    return expr
