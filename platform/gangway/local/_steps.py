"""A ``steps`` template: its groups one after the other, the steps of a group side by side
(up to the parallelism); a step that fails (without ``continueOn``) fails the template once
its group has ended, and the groups after it do not run."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gangway.local._composite import Body, child_name
from gangway.local._dag import continue_on
from gangway.local._model import NodeResult
from gangway.local._tasks import FAILED, ended_scope, run_task

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["run_steps"]


def run_steps(
    w: Walker, template: Mapping[str, Any], prefix: str, scope: Mapping[str, str], depth: int
) -> Body:
    groups = [g if isinstance(g, list) else [g] for g in template.get("steps") or []]
    width = max(1, min(w.slots.n, int(template.get("parallelism") or w.slots.n)))
    ended: dict[str, NodeResult] = {}
    failed: list[str] = []
    for g, group in enumerate(groups):
        if failed or w.stopping:
            why = "not run: an earlier step failed" if failed else "not run: the run is stopping"
            for step in group:
                w.omit(child_name(prefix, str(step["name"]), g), step, why)
            continue
        sc = {**scope, **w.globals, **ended_scope("steps", ended)}

        def one(step: Mapping[str, Any], g: int = g, sc: Mapping[str, str] = sc) -> NodeResult:
            return run_task(w, step, child_name(prefix, str(step["name"]), g), sc, depth, "steps")

        with ThreadPoolExecutor(max_workers=max(1, min(width, len(group)))) as pool:
            results = list(pool.map(one, group))
        for step, node in zip(group, results, strict=True):
            ended[str(step["name"])] = node
            if node.phase in FAILED and node.phase not in continue_on(step):
                failed.append(str(step["name"]))
    phase = "Failed" if failed or w.stopping else "Succeeded"
    message = f"failed: {', '.join(failed)}" if failed else ""
    return Body(phase, ended_scope("steps", ended), message)
