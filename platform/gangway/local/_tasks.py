"""One DAG task or step: its ``when``, its fan-out (``withItems``, ``withParam``,
``withSequence``, side by side up to the parallelism), its template called at its node, and
its exit handler and lifecycle hooks once it has ended."""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gangway.argo.expressions import evaluate, when_holds
from gangway.argo.scope import aggregate_scope, item_scope, node_scope
from gangway.argo.substitution import substitute
from gangway.local._boundary import FAIL_FAST, Boundary
from gangway.local._inputs import task_items
from gangway.local._results import NodeResult

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["MAX_ITEMS_AT_ONCE", "ended_scope", "run_task"]

FAILED = ("Failed", "Error")

MAX_ITEMS_AT_ONCE = 128
"""Threads one fan-out has at once (this process's, not a limit of Argo's): more items than
this wait for a thread, not for the parallelism."""


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
    boundary: Boundary,
    token: object | None = None,
) -> NodeResult:
    """Run one task (``kind`` "tasks") or step (``kind`` "steps") at ``node_name``, a child of
    ``boundary`` (its DAG or steps template at its node), in the place ``token`` holds there
    (taken when it was started; one is taken now without it)."""
    token = token if token is not None else boundary.place()
    call = _Call(w, task, depth, kind, boundary)
    try:
        items = task_items(task, scope)
        if items is None:
            node = _skipped(w, task, node_name, scope) or call.child(node_name, scope, token)
        else:
            node = _fan_out(call, node_name, scope, items, token)
        _hooks(call, node, scope)
    except Exception as e:  # a bad withParam, an unknown variable in when: the run ends
        return w.failed(node_name, task, e)
    finally:
        boundary.cancel(token)  # not used: a Skipped task, an error
    return node


@dataclass(frozen=True)
class _Call:
    """A task or step calling its template: each node it starts is a child of ``boundary``."""

    w: Walker
    task: Mapping[str, Any]
    depth: int
    kind: str | None
    """"tasks" or "steps"; None for an exit handler or a hook."""
    boundary: Boundary

    def child(self, node_name: str, scope: Mapping[str, str], token: object | None) -> NodeResult:
        """The template called at ``node_name`` once ``boundary`` lets it start (a suspend
        node is no child that counts); Omitted when its ``failFast`` stopped it."""
        w, task = self.w, self.task
        if "suspend" in w.template_of(task):
            if token is not None:
                self.boundary.cancel(token)
            return w.call(task, node_name, scope, self.depth, self.kind)
        node = self.boundary.admit(
            lambda: w.call(task, node_name, scope, self.depth, self.kind), token
        )
        return node if node is not None else w.omit(node_name, task, f"not run: {FAIL_FAST}")


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
    skipped.outputs = w.skipped_outputs(task)
    w.record(skipped)
    return skipped


def _fan_out(
    call: _Call, node_name: str, scope: Mapping[str, str], items: list[Any], token: object
) -> NodeResult:
    w, task = call.w, call.task
    name = str(task["name"])
    summary = NodeResult(node_name, name, str(task.get("template") or name), "Skipped")
    if not items:
        summary.message = _EMPTY
        w.record(summary)
        return summary
    # Each item is a child of the template, in item order: the task's place, then new ones.
    tokens = [token, *(call.boundary.place() for _ in items[1:])]

    def one(i: int, item: Any) -> NodeResult:
        label = item if isinstance(item, str | int | float) else i
        item_name = f"{node_name}({i}:{label})"
        try:
            if w.stopping:
                return w.omit(item_name, task, "not run: the run is stopping")
            item_vars = {**scope, **item_scope(item)}
            return _skipped(w, task, item_name, item_vars) or call.child(
                item_name, item_vars, tokens[i]
            )
        finally:
            call.boundary.cancel(tokens[i])

    # Items run side by side, as Argo runs them (the template's parallelism and the run's
    # admit them); at most MAX_ITEMS_AT_ONCE threads wait for that at once.
    width = min(len(items), call.boundary.limit or len(items), MAX_ITEMS_AT_ONCE)
    with ThreadPoolExecutor(max_workers=max(1, width)) as pool:
        summary.children = list(pool.map(one, range(len(items)), items))
    ok = all(c.phase in ("Succeeded", "Skipped") for c in summary.children)
    summary.phase = "Succeeded" if ok else "Failed"
    summary.outputs = {
        k: json.dumps([c.outputs.get(k) for c in summary.children])
        for k in {k for c in summary.children for k in c.outputs}
    }
    return summary


def _hooks(call: _Call, node: NodeResult, scope: Mapping[str, str]) -> None:
    """The task's ``onExit`` and ``hooks`` once it has ended: ``exit`` always, the others
    when their ``expression`` holds with the task's own results in scope. Each is a child of
    the task's template as the task is (Argo runs them at its boundary)."""
    w, task = call.w, call.task
    if w.stopping and w.procs.stopping is not None:
        return
    own = {**scope, **ended_scope(call.kind or "tasks", {str(task["name"]): node})}
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
        hook = _Call(w, hook_task, call.depth, None, call.boundary)
        hook.child(f"{node.name}.{label}", own, None)
