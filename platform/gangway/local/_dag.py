"""A ``dag`` template's tasks, as Argo schedules them.

The tasks to run are ``dag.target``'s (its ``{{...}}`` filled like any field of the template;
names apart by one space, as Argo splits them; a name that is no task ends the run with
Argo's "target X does not exist") and what they depend on, else all. A task is ready once
every task its ``depends`` (or ``dependencies``) names has ended; it then runs when its clause
holds (:mod:`gangway.argo.depends`) and is Omitted when it does not. Every ready task starts
— a failure does not stop the others: Argo's ``dag.failFast`` decides only how the DAG's
phase is read once its tasks have ended, which comes to the same (``workflow/controller/
dag.go`` ``assessDAGPhase``; argoproj/argo-workflows#5223). What the template's own
``parallelism`` and ``failFast`` hold back is :mod:`._boundary`'s. The DAG's phase is
read from its target tasks as Argo reads it (:mod:`gangway.argo.dag_phase`): a failure a
later task recovers from does not fail it; one whose dependents were all Omitted does.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gangway.argo.dag_phase import TaskEnd, dag_phase, leaf_tasks
from gangway.argo.depends import Depends, TaskState, task_depends
from gangway.argo.substitution import substitute
from gangway.errors import PermanentError
from gangway.local._boundary import FAIL_FAST, Boundary
from gangway.local._results import Body, NodeResult, child_name
from gangway.local._tasks import FAILED, ended_scope, run_task

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["run_dag"]


def continue_on(task: Mapping[str, Any]) -> frozenset[str]:
    """The failure phases a task's ``continueOn`` lets pass: ``Failed``, ``Error``."""
    c = task.get("continueOn") or {}
    return frozenset(p for p, key in (("Failed", "failed"), ("Error", "error")) if c.get(key))


@dataclass
class _Dag:
    """One DAG template running at one node: its tasks, and how far they have got."""

    w: Walker
    tasks: dict[str, Mapping[str, Any]]
    clauses: dict[str, Depends]
    prefix: str
    scope: Mapping[str, str]
    depth: int
    boundary: Boundary
    pending: list[str] = field(default_factory=list)
    states: dict[str, TaskState] = field(default_factory=dict)
    ended: dict[str, NodeResult] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        """Nothing new starts: the run is stopping, or the template's failFast stopped it."""
        return self.boundary.halted or self.w.stopping

    def start_ready(self, pool: ThreadPoolExecutor, running: dict[Future[NodeResult], str]) -> None:
        """Start every pending task whose dependencies have ended (in the DAG's order, each
        taking its place among the template's children); Omit those whose clause is false
        (which may make others ready)."""
        w, progressed = self.w, True
        while progressed and not self.held:
            progressed = False
            for name in list(self.pending):
                if not all(d in self.states for d in self.clauses[name].tasks):
                    continue
                self.pending.remove(name)
                progressed = True
                node_name = child_name(self.prefix, name)
                if not self.clauses[name].holds(self.states):
                    why = f"depends {self.clauses[name].clause!r} is false"
                    self.ended[name] = w.omit(node_name, self.tasks[name], why)
                    self.states[name] = TaskState("Omitted")
                    continue
                sc = {**self.scope, **w.globals, **ended_scope("tasks", self.ended)}
                args = (w, self.tasks[name], node_name, sc, self.depth, "tasks", self.boundary)
                running[pool.submit(run_task, *args, self.boundary.place())] = name

    def run(self) -> None:
        """Run the tasks to their end (or until nothing more may start)."""
        with ThreadPoolExecutor(max_workers=max(1, len(self.pending))) as pool:
            running: dict[Future[NodeResult], str] = {}
            while True:
                self.start_ready(pool, running)
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    name = running.pop(f)
                    self.ended[name] = node = f.result()
                    self.states[name] = _state(node, self.tasks[name])


def run_dag(
    w: Walker, template: Mapping[str, Any], prefix: str, scope: Mapping[str, str], depth: int
) -> Body:
    dag = template["dag"]
    tasks = {str(t["name"]): t for t in dag.get("tasks") or []}
    where = f"template {template['name']}"
    clauses = {n: task_depends(t, where=f"{where} task {n}") for n, t in tasks.items()}
    d = _Dag(w, tasks, clauses, prefix, scope, depth, Boundary(template))
    depends_on = {n: [t for t in clauses[n].tasks if t in tasks] for n in tasks}
    targets, d.pending = _targets(template, depends_on, scope)
    d.run()
    if d.pending and not d.held:
        w.error = w.error or f"tasks {d.pending} of {where} can never run (a dependency cycle?)"
    _omit_rest(w, d.pending, tasks, prefix, d.boundary)
    if d.boundary.halted:
        return Body("Failed", ended_scope("tasks", d.ended), FAIL_FAST)
    ends = {
        n: TaskEnd(node.phase, tuple(c.phase for c in node.children), continue_on(tasks[n]))
        for n, node in d.ended.items()
    }
    fail_fast = dag.get("failFast", True) is not False
    phase, failing = dag_phase(targets, depends_on, ends, fail_fast=fail_fast)
    failed = [n for n, node in d.ended.items() if node.phase in FAILED] if failing else []
    message = f"failed: {', '.join(failed or failing)}" if failing else ""
    phase = "Failed" if failing or w.stopping else "Succeeded"
    return Body(phase, ended_scope("tasks", d.ended), message)


def _state(node: NodeResult, task: Mapping[str, Any]) -> TaskState:
    return TaskState(
        node.phase,
        tuple(c.phase for c in node.children),
        daemoned=node.daemoned,
        continue_on=continue_on(task),
    )


def _targets(
    template: Mapping[str, Any],
    depends_on: Mapping[str, list[str]],
    scope: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """The target tasks (``target``'s, else the leaves: Argo's) and the tasks to run — all,
    or the targets and what they depend on — in the DAG's order.
    ``target`` is filled from the template's scope as Argo fills the whole template, then
    split at each space as Argo splits it; a name that is no task is an error (Argo ends the
    workflow in Error: "target X does not exist")."""
    where = f"templates.{template['name']}.dag.target"
    text = substitute(str(template["dag"].get("target") or ""), scope, where=where)
    if not text:
        return leaf_tasks(depends_on), list(depends_on)
    names = text.split(" ")
    unknown = [t for t in names if t not in depends_on]
    if unknown:
        raise PermanentError(
            f"{where}: target {unknown[0]} does not exist (target {text!r}; the tasks are "
            f"{', '.join(depends_on)}); name tasks of this DAG, one space apart"
        )
    want: set[str] = set()
    todo = list(names)
    while todo:
        t = todo.pop()
        if t not in want:
            want.add(t)
            todo += depends_on[t]
    return names, [t for t in depends_on if t in want]


def _omit_rest(
    w: Walker,
    pending: list[str],
    tasks: Mapping[str, Mapping[str, Any]],
    prefix: str,
    boundary: Boundary,
) -> None:
    why = f"not run: {FAIL_FAST}" if boundary.halted else "not run: interrupted"
    if w.error and not boundary.halted:
        why = "not run: the workflow failed first"
    if w.procs.stopping is not None:
        import signal

        why = f"not run: interrupted ({signal.Signals(w.procs.stopping).name})"
        if w.stop_reason:
            why = f"not run: {w.stop_reason}"
    for name in pending:
        w.omit(child_name(prefix, name), tasks[name], why)
