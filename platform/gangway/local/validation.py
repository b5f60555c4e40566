"""What the local executor cannot run, found before anything runs — every construct at once,
each with its path — so a user fixes them in one pass instead of one per run.

What depends on values only known at run time (a variable's value, a withParam list, the kind
of a filled resource manifest) is checked when it is known, and ends the run with the error
named (see :class:`gangway.local.LocalExecutor`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gangway.argo.conditions import SATISFIED_BY_NAME, depends_on, resource_condition
from gangway.argo.errors import UnsupportedConstruct
from gangway.argo.expressions import evaluate
from gangway.retries import RETRY_POLICIES, duration_seconds

__all__ = ["JSON_PATH", "check_supported", "task_dependencies", "unsupported"]

UNSUPPORTED_SPEC = ("hooks", "volumeClaimTemplates", "templateDefaults")
"""``synchronization`` (a team's semaphore) is not among them: a local run is one workflow,
alone on this machine, so its semaphores and mutexes are always free."""
UNSUPPORTED_TEMPLATE = (
    "steps",
    "suspend",
    "http",
    "plugin",
    "containerSet",
    "data",
    "sidecars",
    "initContainers",
    "daemon",
    "synchronization",
)
UNSUPPORTED_TASK = ("templateRef", "withSequence", "continueOn", "hooks", "onExit", "inline")
JSON_PATH = re.compile(r"\{(\.[\w-]+)+\}")
"""The jsonPath form a resource template's output may use locally: ``{.status.state.phase}``."""
_LAST_RETRY = {"lastRetry.status": "Failed", "lastRetry.exitCode": "1", "lastRetry.message": ""}


def check_supported(workflow: Mapping[str, Any]) -> None:
    """Raise :class:`UnsupportedConstruct` listing every construct the executor cannot run."""
    found = unsupported(workflow)
    if len(found) == 1:
        raise UnsupportedConstruct(found[0])
    if found:
        raise UnsupportedConstruct(
            f"the local executor cannot run {len(found)} constructs of this workflow:\n"
            + "\n".join(f"  - {f}" for f in found)
        )


def unsupported(workflow: Mapping[str, Any]) -> list[str]:
    """Every construct of ``workflow`` the local executor cannot run, each with its path."""
    spec = workflow.get("spec") or {}
    found = [
        f"spec.{key} is not supported by the local executor"
        for key in UNSUPPORTED_SPEC
        if spec.get(key)
    ]
    templates = {t.get("name"): t for t in spec.get("templates") or []}
    entry = spec.get("entrypoint")
    for i, t in enumerate(spec.get("templates") or []):
        found += _template(t, f"spec.templates[{i}] ({t.get('name')})", entry)
    if entry not in templates:
        return [*found, f"spec.entrypoint {entry!r} names no template"]
    if "dag" not in templates[entry]:
        return [*found, f"the entrypoint {entry!r} must be a DAG template"]
    exit_handler = spec.get("onExit")
    if exit_handler and exit_handler not in templates:
        found.append(f"spec.onExit {exit_handler!r} names no template")
    index = list(templates).index(entry)
    return found + _tasks(templates[entry], f"spec.templates[{index}].dag", templates)


def _template(t: Mapping[str, Any], where: str, entry: Any) -> list[str]:
    found = [
        f"{where}: `{key}` is not supported by the local executor"
        + ("; express the steps as a DAG" if key == "steps" else "")
        for key in UNSUPPORTED_TEMPLATE
        if t.get(key)
    ]
    found += [
        f"{where}: {io}.artifacts are not supported locally"
        for io in ("inputs", "outputs")
        if (t.get(io) or {}).get("artifacts")
    ]
    if any(set(v) - {"name", "emptyDir"} for v in t.get("volumes") or []):
        found.append(f"{where}: only emptyDir volumes run locally")
    if "dag" in t and t.get("name") != entry:
        found.append(f"{where}: nested DAG templates are not supported locally")
    kinds = [k for k in ("container", "script", "resource", "dag") if k in t]
    if not kinds and not any(t.get(k) for k in UNSUPPORTED_TEMPLATE):
        found.append(f"{where}: no container, script, resource or dag to run")
    found += list(_body(t, where))
    found += list(_retry(t.get("retryStrategy") or {}, f"{where}.retryStrategy"))
    return found


def _body(t: Mapping[str, Any], where: str) -> Iterator[str]:
    """What a container, script or resource template must look like to run here."""
    outputs = (t.get("outputs") or {}).get("parameters") or []
    if "container" in t or "script" in t:
        body = t.get("container") or t.get("script") or {}
        if "script" not in t and not (body.get("command") or body.get("args")):
            yield f"{where}: the container has no command (image entrypoints are not known locally)"
        for e in body.get("env") or []:
            if "valueFrom" in e:
                yield f"{where}: env {e.get('name')} uses valueFrom"
        for p in outputs:
            if "path" not in (p.get("valueFrom") or {}):
                yield f"{where}: output {p.get('name')} needs valueFrom.path locally"
    if "resource" in t:
        res = t["resource"] or {}
        if res.get("action") != "create":
            yield f"{where}.resource: only action: create runs locally"
        for key in ("successCondition", "failureCondition"):
            if res.get(key):
                try:
                    resource_condition(str(res[key]), {})
                except UnsupportedConstruct as e:
                    yield f"{where}.resource.{key}: {e}"
        for p in outputs:
            if not JSON_PATH.fullmatch(str((p.get("valueFrom") or {}).get("jsonPath", ""))):
                yield (
                    f"{where}: output {p.get('name')}: only jsonPath like "
                    "'{.status.state.phase}' is supported locally"
                )


def _retry(strategy: Mapping[str, Any], where: str) -> Iterator[str]:
    policy = strategy.get("retryPolicy", "OnFailure")
    if policy not in RETRY_POLICIES:
        yield f"{where}: retryPolicy {policy!r} is not supported locally"
    if strategy.get("expression"):
        try:  # how it reads, not what it says: the values are placeholders
            evaluate(str(strategy["expression"]), _LAST_RETRY)
        except UnsupportedConstruct as e:
            yield f"{where}.expression: {e}"
    backoff = strategy.get("backoff") or {}
    for key in ("duration", "maxDuration"):
        try:
            duration_seconds(backoff.get(key))
        except UnsupportedConstruct as e:
            yield f"{where}.backoff.{key}: {e}"


def task_dependencies(task: Mapping[str, Any], where: str | None = None) -> dict[str, set[str]]:
    """The tasks ``task`` waits for, each with the phases that let it run."""
    if task.get("depends"):
        return depends_on(str(task["depends"]), where=where or f"task {task.get('name')}")
    return {d: set(SATISFIED_BY_NAME) for d in task.get("dependencies") or []}


def _tasks(dag: Mapping[str, Any], where: str, templates: Mapping[Any, Any]) -> list[str]:
    tasks = (dag.get("dag") or {}).get("tasks") or []
    names = {t.get("name") for t in tasks}
    found: list[str] = []
    for j, task in enumerate(tasks):
        at = f"{where}.tasks[{j}] (task {task.get('name')})"
        found += [
            f"{at}: `{key}` is not supported locally" for key in UNSUPPORTED_TASK if task.get(key)
        ]
        if task.get("template") not in templates:
            found.append(f"{at}: unknown template {task.get('template')!r}")
        try:
            deps = task_dependencies(task, at)
        except UnsupportedConstruct as e:
            found.append(str(e))
            continue
        found += [f"{at}: depends on unknown task {d!r}" for d in deps if d not in names]
    return found
