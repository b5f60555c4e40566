"""A DAG's phase once its tasks have ended, read as Argo reads it (``assessDAGPhase`` in
``workflow/controller/dag.go``): a pure function over the tasks' phases.

Only the *target* tasks decide it — ``dag.target``'s, else the leaves (tasks no other task
depends on). A target that ran has its own phase; one that did not (Omitted, Skipped) takes
the phase of the branch that reached it: the last task on the way that Succeeded, Failed or
Errored, a failure winning over a success when several branches reach it. So a failure that a
later task recovers from (``d`` depends on ``a && (b || c)``, ``b`` fails, ``d`` succeeds)
leaves the DAG Succeeded, while a failure whose only dependents were Omitted fails it. A
target's ``continueOn`` for its phase keeps that phase from failing the DAG.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["TaskEnd", "dag_phase", "leaf_tasks"]

COMPLETED = ("Succeeded", "Failed", "Error")
FAILED = ("Failed", "Error")


@dataclass(frozen=True)
class TaskEnd:
    """How one task of the DAG ended: its phase, and its items' phases when it fanned out."""

    phase: str
    items: tuple[str, ...] = ()
    continue_on: frozenset[str] = field(default_factory=frozenset)


def leaf_tasks(depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """The tasks no other task depends on, in the DAG's order (Argo's default targets)."""
    needed = {d for deps in depends_on.values() for d in deps}
    return [t for t in depends_on if t not in needed]


def dag_phase(
    targets: Sequence[str],
    depends_on: Mapping[str, Sequence[str]],
    ended: Mapping[str, TaskEnd],
    *,
    fail_fast: bool = True,
) -> tuple[str, list[str]]:
    """The DAG's phase (``Succeeded``, ``Failed`` or ``Error``) and the targets that failed
    it. ``depends_on`` maps each task to the tasks its clause names; ``ended`` holds every
    task that has a node (ran, was Skipped or Omitted) — one without is never reached."""
    dependents: dict[str, list[str]] = {t: [] for t in depends_on}
    for task, deps in depends_on.items():
        for d in deps:
            dependents.setdefault(d, []).append(task)
    deduced: dict[str, str] = {t: "" for t in targets}
    roots = [t for t, deps in depends_on.items() if not deps]
    queue = deque((t, "Succeeded") for t in roots)
    seen = set(queue)
    while queue:
        task, branch = queue.popleft()
        end = ended.get(task)
        if end is None:
            continue
        if end.phase in COMPLETED:
            branch = end.phase
        if task in deduced and deduced[task] not in FAILED:
            deduced[task] = branch
        # A fanned-out task passes each item's phase on (Argo's children of a task group).
        outs = {p if p in COMPLETED else branch for p in end.items} if end.items else {branch}
        for child in dependents.get(task, []):
            for phase in sorted(outs):
                if (child, phase) not in seen:
                    seen.add((child, phase))
                    queue.append((child, phase))
    result, failing = "Succeeded", []
    for task in targets:
        phase = deduced.get(task, "")
        end = ended.get(task)
        if phase in FAILED and not (end and phase in end.continue_on):
            result = phase
            failing.append(task)
            if fail_fast:
                break
    return result, failing
