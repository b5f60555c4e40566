"""One DAG task or step: its ``when``, its fan-out (``withItems``, ``withParam``,
``withSequence``, side by side up to the parallelism), its template called at its node, and
its exit handler and lifecycle hooks once it has ended."""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gangway.argo.expressions import evaluate, when_holds
from gangway.argo.scope import aggregate_scope, item_scope, node_scope
from gangway.argo.substitution import substitute
from gangway.local._inputs import task_items
from gangway.local._model import NodeResult

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["ended_scope", "run_task"]

FAILED = ("Failed", "Error")


def ended_scope(kind: str, ended: Mapping[str, NodeResult]) -> dict[str, str]:
    """``tasks.NAME.*`` (``kind`` "tasks") or ``steps.NAME.*`` of the children that ended."""
    scope: dict[str, str] = {}
    for name, node in ended.items():
        prefix = f"{kind}.{name}"
        if node.children or node.message == _EMPTY:
            scope.update(aggregate_scope(prefix, node.phase, node.name, node.children))
        else:
            scope.update(
                node_scope(
                    prefix,
                    phase=node.phase,
                    node_id=node.name,
                    outputs=node.outputs,
                    result=node.result,
                    exit_code=node.exit_code,
                    artifacts=node.artifacts,
                    daemoned=node.daemoned,
                )
            )
    return scope


_EMPTY = "no items to run (an empty list)"


def run_task(
    w: Walker,
    task: Mapping[str, Any],
    node_name: str,
    scope: Mapping[str, str],
    depth: int,
    kind: str,
) -> NodeResult:
    """Run one task (``kind`` "tasks") or step (``kind`` "steps") at ``node_name``."""
    try:
        items = task_items(task, scope)
        if items is None:
            node = _skipped(w, task, node_name, scope) or w.call(task, node_name, scope, depth)
        else:
            node = _fan_out(w, task, node_name, scope, depth, items)
        _hooks(w, task, node, scope, depth, kind)
    except Exception as e:  # a bad withParam, an unknown variable in when: the run ends
        return w.failed(node_name, task, e)
    return node


def _skipped(
    w: Walker, task: Mapping[str, Any], node_name: str, scope: Mapping[str, str]
) -> NodeResult | None:
    """The Skipped node when the task's ``when`` is false (for a fanned-out task, evaluated
    per item, with ``{{item}}`` in scope), else None."""
    if "when" not in task:
        return None
    cond = substitute(str(task["when"]), scope, where=f"{node_name}.when")
    if when_holds(cond):
        return None
    name = str(task["name"])
    skipped = NodeResult(node_name, name, str(task.get("template") or f"{name}-inline"), "Skipped")
    skipped.message = f"when: {cond} is false"
    w.record(skipped)
    return skipped


def _fan_out(
    w: Walker,
    task: Mapping[str, Any],
    node_name: str,
    scope: Mapping[str, str],
    depth: int,
    items: list[Any],
) -> NodeResult:
    name = str(task["name"])
    summary = NodeResult(node_name, name, str(task.get("template") or name), "Skipped")
    if not items:
        summary.message = _EMPTY
        w.record(summary)
        return summary

    def one(i: int, item: Any) -> NodeResult:
        label = item if isinstance(item, str | int | float) else i
        item_name = f"{node_name}({i}:{label})"
        if w.stopping:
            return w.omit(item_name, task, "not run: the run is stopping")
        item_vars = {**scope, **item_scope(item)}
        return _skipped(w, task, item_name, item_vars) or w.call(task, item_name, item_vars, depth)

    # Items run side by side (as Argo runs them) up to the parallelism limit.
    with ThreadPoolExecutor(max_workers=max(1, min(w.slots.n, len(items), 32))) as pool:
        summary.children = list(pool.map(one, range(len(items)), items))
    ok = all(c.phase in ("Succeeded", "Skipped") for c in summary.children)
    summary.phase = "Succeeded" if ok else "Failed"
    summary.outputs = {
        k: json.dumps([c.outputs.get(k) for c in summary.children])
        for k in {k for c in summary.children for k in c.outputs}
    }
    return summary


def _hooks(
    w: Walker,
    task: Mapping[str, Any],
    node: NodeResult,
    scope: Mapping[str, str],
    depth: int,
    kind: str,
) -> None:
    """The task's ``onExit`` and ``hooks`` once it has ended: ``exit`` always, the others
    when their ``expression`` holds with the task's own results in scope."""
    if w.stopping and w.procs.stopping is not None:
        return
    own = {**scope, **ended_scope(kind, {str(task["name"]): node})}
    handlers: list[tuple[str, Mapping[str, Any]]] = []
    if task.get("onExit"):
        handlers.append(("onExit", {"template": task["onExit"]}))
    for hook, spec in (task.get("hooks") or {}).items():
        if hook == "exit":
            handlers.append(("hooks.exit", spec))
        elif spec.get("expression"):
            where = f"{node.name}.hooks.{hook}.expression"
            text = substitute(str(spec["expression"]), own, where=where)
            if evaluate(text, own, bare_strings=True) is True:
                handlers.append((f"hooks.{hook}", spec))
    for label, spec in handlers:
        hook_task = {"name": f"{task['name']}.{label}", **spec}
        w.call(hook_task, f"{node.name}.{label}", own, depth)
