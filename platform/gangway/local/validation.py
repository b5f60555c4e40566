"""What the local executor cannot run, found before anything runs — every construct at once,
each with its path and why — so a user fixes them in one pass instead of one per run.

What depends on values only known at run time (a variable's value, a withParam list, the kind
of a filled resource manifest) is checked when it is known, and ends the run with the error
named (see :class:`gangway.local.LocalExecutor`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gangway.argo.conditions import resource_condition
from gangway.argo.depends import task_depends
from gangway.argo.expressions import evaluate
from gangway.argo.nodes import last_retry_scope
from gangway.argo.retries import RETRY_POLICIES, duration_seconds
from gangway.argo.scope import callers, parameter_values, static_scope, workflow_spec
from gangway.argo.substitution import PLACEHOLDER, fill_known
from gangway.argo.template_defaults import merge_defaults
from gangway.argo.validation import validation_problems
from gangway.errors import FieldErrors, UnsupportedConstruct
from gangway.local._env import Secrets
from gangway.local._validate_containers import container_problems
from gangway.user_yaml import load_yaml

__all__ = [
    "JSON_PATH",
    "check_shape",
    "check_supported",
    "retry_notices",
    "unsupported",
    "with_defaults",
]

CLUSTER_ONLY = {
    "http": "an HTTP template is run by Argo's agent pod",
    "plugin": "executor plugins run in the cluster",
    "data": "data templates transform artifacts in Argo's own pod",
}
"""Template kinds that cannot be emulated here, with why."""
LOCAL_VOLUMES = ("emptyDir", "persistentVolumeClaim", "secret", "hostPath")
ARTIFACT_SOURCES = ("raw", "from", "fromExpression")
JSON_PATH = re.compile(r"\{(\.[\w-]+)+\}")
"""The jsonPath form a resource template's output may use locally: ``{.status.state.phase}``."""
_LAST_RETRY = last_retry_scope("Failed", 1, 0.0, "", no_exit_code="-1")


def with_defaults(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The workflow's templates with ``templateDefaults`` merged in as Argo merges them
    (:func:`gangway.argo.template_defaults.merge_defaults`), and
    ``spec.retryStrategy`` for each template without one of its own (Argo's fallback)."""
    defaults = dict(spec.get("templateDefaults") or {})
    out = []
    for t in spec.get("templates") or []:
        merged = merge_defaults(defaults, t)
        if merged.get("retryStrategy") is None and spec.get("retryStrategy") is not None:
            merged["retryStrategy"] = spec["retryStrategy"]
        out.append(merged)
    return out


def check_shape(manifest: Mapping[str, Any], where: str) -> None:
    """Refuse a manifest Argo's validation would refuse — a field of the wrong type, a field
    Argo does not know, a timeout Argo does not take — every problem at once, before anything
    reads it (:func:`gangway.argo.validation.validation_problems`)."""
    base = "spec.workflowSpec" if manifest.get("kind") == "CronWorkflow" else "spec"
    found = validation_problems(workflow_spec(manifest), base)
    if found:
        raise FieldErrors(where, found)


def check_supported(workflow: Mapping[str, Any], secrets: Secrets | None = None) -> None:
    """Raise :class:`UnsupportedConstruct` listing every construct the executor cannot run."""
    found = unsupported(workflow, secrets)
    if len(found) == 1:
        raise UnsupportedConstruct(found[0])
    if found:
        raise UnsupportedConstruct(
            f"the local executor cannot run {len(found)} constructs of this workflow:\n"
            + "\n".join(f"  - {f}" for f in found)
        )


def retry_notices(workflow: Mapping[str, Any]) -> list[str]:
    """What a local run does differently that a user should hear before it starts: each
    template whose ``retryStrategy`` has no ``limit`` (Argo retries it without end; a local
    run stops after :data:`gangway.local._retry.UNBOUNDED_RETRIES`)."""
    from gangway.local._retry import UNBOUNDED_RETRIES, without_limit

    spec = workflow.get("spec") or {}
    unbounded = [str(t.get("name")) for t in with_defaults(spec) if without_limit(t)]
    if not unbounded:
        return []
    return [
        f"retryStrategy without limit on {', '.join(unbounded)}: Argo retries until it "
        f"succeeds; this run retries each at most {UNBOUNDED_RETRIES} times"
    ]


def unsupported(workflow: Mapping[str, Any], secrets: Secrets | None = None) -> list[str]:
    """Every construct of ``workflow`` the local executor cannot run, each with its path."""
    spec = workflow.get("spec") or {}
    found = []
    if spec.get("workflowTemplateRef"):
        found.append(
            "spec.workflowTemplateRef: the referenced WorkflowTemplate is on a cluster; run "
            "the pipeline file that defines it, or a YAML file that holds both"
        )
    found += list(_volumes(spec.get("volumes") or [], "spec"))
    arguments = (spec.get("arguments") or {}).get("artifacts") or []
    found += list(_remote(arguments, "spec.arguments.artifacts: artifact"))
    templates = {t.get("name"): t for t in with_defaults(spec)}
    labels = (workflow.get("metadata") or {}).get("labels") or {}
    run = _Run(spec, templates, secrets, labels)
    for i, t in enumerate(with_defaults(spec)):
        found += _template(t, f"spec.templates[{i}] ({t.get('name')})", run)
    entry = spec.get("entrypoint")
    if not entry:
        found.append(
            "spec.entrypoint: missing — Argo runs a workflow from the template it names; add "
            f"entrypoint: NAME (templates: {', '.join(map(str, templates)) or 'none'})"
        )
    elif entry not in templates:
        found.append(f"spec.entrypoint {entry!r} names no template")
    handlers = [("spec.onExit", spec.get("onExit"))]
    handlers += [
        (f"spec.hooks.{k}", (h or {}).get("template")) for k, h in (spec.get("hooks") or {}).items()
    ]
    found += [
        f"{where} {name!r} names no template"
        for where, name in handlers
        if name and name not in templates
    ]
    return found


@dataclass(frozen=True)
class _Run:
    """What checking a template needs of its workflow."""

    spec: Mapping[str, Any]
    templates: Mapping[Any, Mapping[str, Any]]
    secrets: Secrets | None
    labels: Mapping[str, str]

    def inline(self, t: Mapping[str, Any]) -> dict[str, Any]:
        """An inline template as it runs: with ``templateDefaults`` (and the workflow's
        ``retryStrategy``) under it, as Argo merges them into every template it runs."""
        return with_defaults({**self.spec, "templates": [t]})[0]


def _template(t: Mapping[str, Any], where: str, run: _Run) -> list[str]:
    """Every problem of template ``t`` (a named one, or an inline one), with its path."""
    found = [
        f"{where}: `{key}` cannot run locally: {why}"
        for key, why in CLUSTER_ONLY.items()
        if t.get(key)
    ]
    kinds = ("container", "script", "resource", "dag", "steps", "suspend", "containerSet")
    if not any(k in t for k in kinds) and not found:
        found.append(
            f"{where}: no container, script, resource, dag, steps, suspend or containerSet"
        )
    found += list(_artifacts(t, where))
    found += list(_volumes(t.get("volumes") or [], where))
    found += list(container_problems(t, where, run.secrets))
    found += list(_resource(t, where))
    found += list(_retry(t.get("retryStrategy") or {}, f"{where}.retryStrategy"))
    found += list(_gang_size(t, run.spec, run.labels, where))
    if "dag" in t:
        found += _tasks(t, f"{where}.dag", run)
    for g, group in enumerate(t.get("steps") or []):
        for j, step in enumerate(group if isinstance(group, list) else [group]):
            found += _call(step, f"{where}.steps[{g}][{j}] (step {step.get('name')})", run)
    return found


def _volumes(volumes: list[Mapping[str, Any]], where: str) -> Iterator[str]:
    for v in volumes:
        if not any(k in v for k in LOCAL_VOLUMES):
            kind = next((k for k in v if k != "name"), "?")
            yield (
                f"{where}: volume {v.get('name')} ({kind}): only "
                f"{', '.join(LOCAL_VOLUMES)} volumes run locally"
            )


_ARTIFACT_FIELDS = ("name", "path", "optional", "mode", "archive", "recurseMode", "deleted")


def _remote(artifacts: list[Mapping[str, Any]], what: str) -> Iterator[str]:
    """Input artifacts (or workflow arguments) from a place only a cluster reaches."""
    for a in artifacts:
        remote = [k for k in a if k not in (*_ARTIFACT_FIELDS, "globalName", *ARTIFACT_SOURCES)]
        if remote:
            yield (
                f"{what} {a.get('name')} comes from {remote[0]}: local runs take "
                "artifacts from earlier steps (from) or raw data only"
            )


def _artifacts(t: Mapping[str, Any], where: str) -> Iterator[str]:
    inputs = (t.get("inputs") or {}).get("artifacts") or []
    yield from _remote(inputs, f"{where}: input artifact")
    for a in (t.get("outputs") or {}).get("artifacts") or []:
        if "zip" in (a.get("archive") or {}):
            yield (
                f"{where}: output artifact {a.get('name')}: archive zip is not supported "
                "locally (use tar or none)"
            )


def _resource(t: Mapping[str, Any], where: str) -> Iterator[str]:
    if "resource" not in t:
        return
    res = t["resource"] or {}
    if res.get("action") != "create":
        yield f"{where}.resource: only action: create runs locally (got {res.get('action')!r})"
    try:
        obj = load_yaml(fill_known(str(res.get("manifest", "")), {}, "x"))
    except yaml.YAMLError:
        obj = None
    if isinstance(obj, dict) and not PLACEHOLDER.search(str(obj.get("kind", ""))):
        from gangway.volcano.gang import is_job

        if not is_job(obj):
            yield (
                f"{where}.resource: a {obj.get('apiVersion')}/{obj.get('kind')} needs a cluster; "
                "only Volcano Jobs run locally (as a gang of processes)"
            )
    for key in ("successCondition", "failureCondition"):
        if res.get(key):
            try:
                resource_condition(str(res[key]), {})
            except UnsupportedConstruct as e:
                yield f"{where}.resource.{key}: {e}"
    for p in (t.get("outputs") or {}).get("parameters") or []:
        if not JSON_PATH.fullmatch(str((p.get("valueFrom") or {}).get("jsonPath", ""))):
            yield (
                f"{where}: output {p.get('name')}: only jsonPath like "
                "'{.status.state.phase}' is supported locally"
            )


def _gang_size(
    t: Mapping[str, Any], spec: Mapping[str, Any], labels: Mapping[str, str], where: str
) -> Iterator[str]:
    """A Volcano Job larger than this machine runs, as the workflow's values fill it (its pods
    and processes usually come from parameters: ``-p nodes=9``), naming those parameters. A
    manifest whose size is only known at run time is checked then."""
    from gangway.argo.manifests import fill_manifest
    from gangway.local._gang import oversized
    from gangway.volcano.gang import is_job, read_gang

    if "resource" not in t:
        return
    try:
        job = fill_manifest(
            str((t["resource"] or {}).get("manifest", "")), static_scope(t, spec, labels), where=""
        )
        problem = oversized(read_gang(job)) if is_job(job) else None
    except Exception:  # a size known only at run time, or a manifest refused elsewhere
        return
    if problem is None:
        return
    yield f"{where}: {problem}{_sized_by(t, spec)}"


_INPUT = re.compile(r"inputs\.parameters\.([\w-]+)")
_WORKFLOW_PARAM = re.compile(r"\{\{\s*workflow\.parameters\.([\w-]+)\s*\}\}")


def _sized_by(t: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """`` (set by -p nodes=9)``: the workflow parameters that reach the manifest's sizes
    (replicas, minAvailable, --nproc-per-node) through the calling task's arguments."""
    from gangway.step.torchrun import NPROC_FLAGS
    from gangway.volcano.gang import size_lines

    manifest = str((t.get("resource") or {}).get("manifest", ""))
    lines = size_lines(manifest) + [
        line for line in manifest.splitlines() if any(f in line for f in NPROC_FLAGS)
    ]
    inputs = {m for line in lines for m in _INPUT.findall(line)}
    values = parameter_values(spec)
    used = [
        f"-p {m.group(1)}={values[m.group(1)]}"
        for call in callers(spec, str(t.get("name")))
        for a in (call.get("arguments") or {}).get("parameters") or []
        if a.get("name") in inputs
        for m in _WORKFLOW_PARAM.finditer(str(a.get("value", "")))
        if m.group(1) in values
    ]
    return f" (set by {', '.join(dict.fromkeys(used))})" if used else ""


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


def _call(task: Mapping[str, Any], at: str, run: _Run) -> list[str]:
    """What a DAG task or a step names: its template (an inline one is checked as a named one
    is) and its handlers."""
    found = []
    templates = run.templates
    if task.get("inline"):
        found += _template(run.inline(task["inline"]), f"{at}.inline", run)
    if task.get("templateRef"):
        ref = task["templateRef"]
        found.append(
            f"{at}: templateRef {ref.get('name')}/{ref.get('template')} names a template on a "
            "cluster; define the template in this workflow (or in its YAML file)"
        )
    elif not task.get("inline") and task.get("template") not in templates:
        found.append(f"{at}: unknown template {task.get('template')!r}")
    handlers = [task.get("onExit")] + [
        (h or {}).get("template") for h in (task.get("hooks") or {}).values()
    ]
    found += [
        f"{at}: exit handler / hook {h!r} names no template"
        for h in handlers
        if h and h not in templates
    ]
    return found


def _tasks(dag: Mapping[str, Any], where: str, run: _Run) -> list[str]:
    tasks = (dag.get("dag") or {}).get("tasks") or []
    names = {t.get("name") for t in tasks}
    found: list[str] = []
    graph: dict[str, set[str]] = {}
    for j, task in enumerate(tasks):
        at = f"{where}.tasks[{j}] (task {task.get('name')})"
        found += _call(task, at, run)
        found += list(_sequence(task, at))
        refs = {
            m.group(1)
            for m in _TASK_REF.finditer(str({k: v for k, v in task.items() if k != "name"}))
        }
        found += [
            f"{at}: refers to unknown task {r!r} ({{{{tasks.{r}…}}}})" for r in sorted(refs - names)
        ]
        try:
            deps = task_depends(task, where=at)
        except UnsupportedConstruct as e:
            found.append(str(e))
            continue
        found += [f"{at}: depends on unknown task {d!r}" for d in deps.tasks if d not in names]
        graph[str(task.get("name"))] = {d for d in deps.tasks if d in names}
    cycle = _cycle(graph)
    if cycle:
        found.append(f"{where}: tasks depend on each other in a cycle: {' -> '.join(cycle)}")
    # Argo's validation: each literal name of dag.target (split at spaces) is a task.
    target = str((dag.get("dag") or {}).get("target") or "")
    listed = ", ".join(str(task.get("name")) for task in tasks)
    found += [
        f"{where}.dag.target: target {name!r} is not defined (the tasks: {listed})"
        for name in (target.split(" ") if target else [])
        if "{{" not in name and name not in names
    ]
    return found


_TASK_REF = re.compile(r"\{\{=?\s*tasks\.([A-Za-z0-9][\w-]*)\.")


def _sequence(task: Mapping[str, Any], at: str) -> Iterator[str]:
    seq = task.get("withSequence") or {}
    if seq.get("count") not in (None, "") and seq.get("end") not in (None, ""):
        yield f"{at}: withSequence takes count or end, not both"


def _cycle(graph: Mapping[str, set[str]]) -> list[str]:
    """A dependency cycle of ``graph`` (task → what it waits for), or []."""
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> list[str]:
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return [*path[path.index(d) :], d] if d in path else [n, d]
            if d not in state and (found := visit(d, [*path, d])):
                return found
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state and (found := visit(n, [n])):
            return found
    return []
