"""A ``dag`` or ``steps`` template at one node: its children run (:mod:`._dag`,
:mod:`._steps`), the whole retried by the template's ``retryStrategy``, and its outputs taken
from its children's — ``valueFrom.parameter`` / ``valueFrom.expression`` for parameters,
``from`` for artifacts — as Argo takes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gangway.argo.expressions import as_text, evaluate
from gangway.argo.retries import LastAttempt, next_retry
from gangway.argo.substitution import substitute
from gangway.local._dag import run_dag
from gangway.local._results import NodeResult
from gangway.local._retry import attempt_scope, retry_limit
from gangway.local._steps import run_steps

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["run_composite"]


def run_composite(
    w: Walker,
    template: Mapping[str, Any],
    scope: Mapping[str, str],
    node_name: str,
    task: str,
    depth: int,
) -> NodeResult:
    run = run_dag if "dag" in template else run_steps
    limit = retry_limit(template, scope, f"template {template['name']}")
    started, attempt = w.clock.now(), 0
    last: LastAttempt | None = None
    stopped = ""
    while True:
        prefix = node_name if attempt == 0 else f"{node_name}({attempt})"
        began = w.clock.now()
        attempt_vars = {**scope, **attempt_scope(template, attempt, last)}
        try:
            body = run(w, template, prefix, attempt_vars, depth)
        finally:
            w.stop_daemons(prefix)
        if body.phase == "Succeeded" or w.stopping:
            break
        last = LastAttempt(body.phase, None, body.message, w.clock.now() - began)
        elapsed = w.clock.now() - started
        delay = next_retry(limit.strategy, last, retries_done=attempt, elapsed=elapsed)
        if delay is None:
            stopped = limit.stopped(attempt)
            break
        w.clock.sleep(delay)
        attempt += 1
    node = NodeResult(node_name, task, str(template["name"]), body.phase, attempt + 1)
    node.message = "; ".join(m for m in (body.message, stopped) if m)
    if body.phase == "Succeeded":
        node.outputs, node.artifacts = _outputs(template, {**scope, **body.scope}, node_name)
        w.publish(template, node)
    return node


def _outputs(
    template: Mapping[str, Any], scope: Mapping[str, str], node_name: str
) -> tuple[dict[str, str], dict[str, str]]:
    where = f"node {node_name}: outputs"
    outs = template.get("outputs") or {}
    params: dict[str, str] = {}
    for p in outs.get("parameters") or []:
        vf = p.get("valueFrom") or {}
        try:
            if "parameter" in vf:
                params[p["name"]] = substitute(str(vf["parameter"]), scope, where=where)
            elif "expression" in vf:
                value = evaluate(str(vf["expression"]), scope, missing=None)
                params[p["name"]] = as_text(value)
            elif "value" in p:
                params[p["name"]] = substitute(str(p["value"]), scope, where=where)
        except Exception:
            if "default" not in vf:
                raise
            params[p["name"]] = str(vf["default"])
    artifacts = {
        str(a["name"]): substitute(str(a["from"]), scope, where=where)
        for a in outs.get("artifacts") or []
        if a.get("from")
    }
    return params, artifacts
