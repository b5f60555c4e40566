"""A ``steps`` template: its groups one after the other, every step of a group side by side;
a step that fails (without ``continueOn``) fails the template once its group has ended, and
the groups after it do not run. What the template's own ``parallelism`` and ``failFast`` hold
back — its steps and their items are its children — is :mod:`._boundary`'s (Argo:
``workflow/controller/steps.go`` ``executeStepGroup``, ``operator.go`` ``checkParallelism``)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gangway.local._boundary import FAIL_FAST, Boundary
from gangway.local._dag import continue_on
from gangway.local._results import Body, NodeResult, child_name
from gangway.local._tasks import FAILED, ended_scope, run_task

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["run_steps"]


def run_steps(
    w: Walker, template: Mapping[str, Any], prefix: str, scope: Mapping[str, str], depth: int
) -> Body:
    groups = [g if isinstance(g, list) else [g] for g in template.get("steps") or []]
    boundary = Boundary(template)
    ended: dict[str, NodeResult] = {}
    failed: list[str] = []
    for g, group in enumerate(groups):
        if failed or w.stopping or boundary.halted:
            why = "not run: an earlier step failed" if failed else "not run: the run is stopping"
            why = f"not run: {FAIL_FAST}" if boundary.halted else why
            for step in group:
                w.omit(child_name(prefix, str(step["name"]), g), step, why)
            continue
        sc = {**scope, **w.globals, **ended_scope("steps", ended)}
        places = [boundary.place() for _ in group]  # the group's order

        def one(
            i: int,
            g: int = g,
            group: list[Mapping[str, Any]] = group,
            places: list[object] = places,
            sc: Mapping[str, str] = sc,
        ) -> NodeResult:
            name = child_name(prefix, str(group[i]["name"]), g)
            return run_task(w, group[i], name, sc, depth, "steps", boundary, places[i])

        with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
            results = list(pool.map(one, range(len(group))))
        for step, node in zip(group, results, strict=True):
            ended[str(step["name"])] = node
            if node.phase in FAILED and node.phase not in continue_on(step):
                failed.append(str(step["name"]))
    if boundary.halted:
        return Body("Failed", ended_scope("steps", ended), FAIL_FAST)
    phase = "Failed" if failed or w.stopping else "Succeeded"
    message = f"failed: {', '.join(failed)}" if failed else ""
    return Body(phase, ended_scope("steps", ended), message)
