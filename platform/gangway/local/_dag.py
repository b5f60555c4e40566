"""A ``dag`` template's tasks, as Argo schedules them.

A task is ready once every task its ``depends`` (or ``dependencies``) names has ended; it then
runs when its clause holds (:mod:`gangway.argo.depends`) and is Omitted when it does not.
Ready tasks run side by side, up to the parallelism (the run's, and the template's own).
With ``failFast`` (the default) a failure no task handles — no ``continueOn`` for it, no
clause naming its failure — starts nothing new. The DAG fails when a task failed and nothing
handled it: its ``continueOn``, or a task whose clause names that failure and that ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from gangway.argo.depends import Depends, TaskState, task_depends
from gangway.local._composite import Body, child_name
from gangway.local._model import NodeResult
from gangway.local._tasks import FAILED, ended_scope, run_task

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["run_dag"]


def continue_on(task: Mapping[str, Any]) -> frozenset[str]:
    """The failure phases a task's ``continueOn`` lets pass: ``Failed``, ``Error``."""
    c = task.get("continueOn") or {}
    return frozenset(p for p, key in (("Failed", "failed"), ("Error", "error")) if c.get(key))


def run_dag(
    w: Walker, template: Mapping[str, Any], prefix: str, scope: Mapping[str, str], depth: int
) -> Body:
    dag = template["dag"]
    tasks = {str(t["name"]): t for t in dag.get("tasks") or []}
    where = f"template {template['name']}"
    clauses = {n: task_depends(t, where=f"{where} task {n}") for n, t in tasks.items()}
    pending = _targets(dag, tasks, clauses)
    width = max(1, min(w.slots.n, int(template.get("parallelism") or w.slots.n)))
    fail_fast = dag.get("failFast", True) is not False
    states: dict[str, TaskState] = {}
    ended: dict[str, NodeResult] = {}
    halted = False
    with ThreadPoolExecutor(max_workers=max(1, min(width, len(tasks)))) as pool:
        running: dict[Future[NodeResult], str] = {}
        while True:
            if not (halted or w.stopping):
                _start_ready(
                    w,
                    pending,
                    tasks,
                    clauses,
                    states,
                    ended,
                    running,
                    pool,
                    width,
                    prefix,
                    scope,
                    depth,
                )
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                name = running.pop(f)
                node = f.result()
                ended[name] = node
                states[name] = _state(node, tasks[name])
                if fail_fast and node.phase in FAILED and not _handled(name, tasks, clauses, None):
                    halted = True
    if pending and not (halted or w.stopping):
        w.error = w.error or f"tasks {pending} of {where} can never run (a dependency cycle?)"
    _omit_rest(w, pending, tasks, prefix, halted)
    failed = [
        n
        for n, node in ended.items()
        if node.phase in FAILED and not _handled(n, tasks, clauses, states)
    ]
    phase = "Failed" if failed or w.stopping else "Succeeded"
    message = f"failed: {', '.join(failed)}" if failed else ""
    return Body(phase, ended_scope("tasks", ended), message)


def _start_ready(
    w: Walker,
    pending: list[str],
    tasks: Mapping[str, Mapping[str, Any]],
    clauses: Mapping[str, Depends],
    states: dict[str, TaskState],
    ended: dict[str, NodeResult],
    running: dict[Future[NodeResult], str],
    pool: ThreadPoolExecutor,
    width: int,
    prefix: str,
    scope: Mapping[str, str],
    depth: int,
) -> None:
    """Start every pending task whose dependencies have ended (in the DAG's order), up to
    ``width`` running; Omit those whose clause is false (which may make others ready)."""
    progressed = True
    while progressed:
        progressed = False
        for name in list(pending):
            if len(running) >= width:
                return
            if not all(d in states for d in clauses[name].tasks):
                continue
            pending.remove(name)
            progressed = True
            node_name = child_name(prefix, name)
            if not clauses[name].holds(states):
                why = f"depends {clauses[name].clause!r} is false"
                ended[name] = w.omit(node_name, tasks[name], why)
                states[name] = TaskState("Omitted")
                continue
            sc = {**scope, **w.globals, **ended_scope("tasks", ended)}
            running[pool.submit(run_task, w, tasks[name], node_name, sc, depth, "tasks")] = name


def _state(node: NodeResult, task: Mapping[str, Any]) -> TaskState:
    return TaskState(
        node.phase,
        tuple(c.phase for c in node.children),
        daemoned=node.daemoned,
        continue_on=continue_on(task),
    )


def _handled(
    name: str,
    tasks: Mapping[str, Mapping[str, Any]],
    clauses: Mapping[str, Depends],
    states: Mapping[str, TaskState] | None,
) -> bool:
    """Whether the failure of ``name`` is expected: its continueOn, or a task whose clause
    names that failure (and, once the DAG has ended, that was not Omitted)."""
    node_phase = states[name].phase if states is not None else "Failed"
    if node_phase in continue_on(tasks[name]) or (states is None and continue_on(tasks[name])):
        return True
    return any(
        clause.expects_failure_of(name)
        and (states is None or (other in states and states[other].phase != "Omitted"))
        for other, clause in clauses.items()
    )


def _targets(
    dag: Mapping[str, Any], tasks: Mapping[str, Mapping[str, Any]], clauses: Mapping[str, Depends]
) -> list[str]:
    """The tasks to run: all, or ``target``'s and what they depend on, in the DAG's order."""
    target = str(dag.get("target") or "").replace(",", " ").split()
    if not target:
        return list(tasks)
    want: set[str] = set()
    todo = [t for t in target if t in tasks]
    while todo:
        t = todo.pop()
        if t not in want:
            want.add(t)
            todo += [d for d in clauses[t].tasks if d in tasks]
    return [t for t in tasks if t in want]


def _omit_rest(
    w: Walker, pending: list[str], tasks: Mapping[str, Mapping[str, Any]], prefix: str, halted: bool
) -> None:
    why = "not run: the workflow failed first" if halted or w.error else "not run: interrupted"
    if w.procs.stopping is not None:
        import signal

        why = f"not run: interrupted ({signal.Signals(w.procs.stopping).name})"
        if w.stop_reason:
            why = f"not run: {w.stop_reason}"
    for name in pending:
        w.omit(child_name(prefix, name), tasks[name], why)
