"""Semantic checks Argo's controller would make before running a workflow."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from gangway.argo.conditions import split_requirements
from gangway.argo.depends import task_depends
from gangway.argo.retries import RETRY_POLICIES
from gangway.argo.scope import workflow_spec
from gangway.argo.substitution import PLACEHOLDER
from gangway.errors import FieldError, UnsupportedConstruct
from gangway.lint._findings import finding

__all__ = ["TEMPLATE_KINDS", "check_workflow"]

TEMPLATE_KINDS = frozenset({"WorkflowTemplate", "ClusterWorkflowTemplate"})
"""Kinds Argo validates in isolation: a ``{{workflow.parameters.X}}`` they do not declare may
come from the Workflow that uses them (``resolveAllVariables``, workflow/validate), so it is a
warning there and an error in a Workflow or CronWorkflow."""

_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]{0,127}$")
_KEY = r"[A-Za-z0-9][\w./-]*"
_VALUE = r"[\w.-]*"
_REQUIREMENT = re.compile(
    rf"\s*(?:!\s*{_KEY}|{_KEY}(?:\s*(?:==|=|!=|>|<)\s*{_VALUE}"
    rf"|\s+(?:in|notin)\s*\(\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*\))?)\s*"
)
"""One requirement of a Kubernetes label selector (``k8s.io/apimachinery/pkg/labels``)."""
_REF = re.compile(
    r"(inputs\.parameters|workflow\.parameters|tasks\.([\w-]+)\.outputs\.parameters)"
    r"(?:\.([\w-]+)|\[['\"]([\w-]+)['\"]\])"
)


def _strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{path}[{i}]")
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, f"{path}.{k}")


def _refs(text: str) -> Iterator[tuple[str, str | None, str]]:
    """(family, task or None, name) for every parameter reference inside ``{{...}}``."""
    for m in PLACEHOLDER.finditer(text):
        for r in _REF.finditer(m.group(2)):
            yield (
                r.group(1).split(".")[0] if r.group(2) else r.group(1),
                r.group(2),
                (r.group(3) or r.group(4)),
            )


def check_workflow(obj: Mapping[str, Any], name: str) -> list[FieldError]:
    """Names, references, DAG shape, retry policies and resource conditions."""
    spec = workflow_spec(obj)
    base = "spec.workflowSpec" if obj.get("kind") == "CronWorkflow" else "spec"
    out: list[FieldError] = []
    undeclared: Literal["error", "warning"] = (
        "warning" if obj.get("kind") in TEMPLATE_KINDS else "error"
    )
    templates = {t.get("name"): t for t in spec.get("templates") or []}
    wf_params = {p.get("name") for p in (spec.get("arguments") or {}).get("parameters") or []}
    wf_params.add("json")  # {{workflow.parameters.json}}: all of them, as JSON
    entry = spec.get("entrypoint")
    if entry and entry not in templates and not spec.get("workflowTemplateRef"):
        out.append(finding(name, f"{base}.entrypoint", f"template {entry!r} does not exist"))
    elif (
        not entry and obj.get("kind") not in TEMPLATE_KINDS and not spec.get("workflowTemplateRef")
    ):
        # A WorkflowTemplate may have none (a library its callers name templates of); a
        # Workflow, or a CronWorkflow's, runs from it: Argo's validation requires it.
        out.append(
            finding(
                name,
                f"{base}.entrypoint",
                "missing; Argo requires the template to start from — add entrypoint: NAME",
            )
        )
    for i, t in enumerate(spec.get("templates") or []):
        tp = f"{base}.templates[{i}]"
        if not _NAME.match(str(t.get("name", ""))):
            out.append(
                finding(
                    name,
                    f"{tp}.name",
                    f"invalid template name {t.get('name')!r}: "
                    "use letters, digits and '-', starting with a letter or digit",
                )
            )
        inputs = {p.get("name") for p in (t.get("inputs") or {}).get("parameters") or []}
        body = {k: v for k, v in t.items() if k != "dag"}
        for path, text in _strings(body, tp):
            for family, _task, ref in _refs(text):
                if family == "inputs.parameters" and ref not in inputs:
                    out.append(
                        finding(
                            name,
                            path,
                            f"{{{{inputs.parameters.{ref}}}}} is not "
                            f"declared in the inputs of template {t.get('name')!r}",
                        )
                    )
                elif family == "workflow.parameters" and ref not in wf_params:
                    out.append(_undeclared_workflow_parameter(ref, path, name, undeclared))
        out += _check_retry(t.get("retryStrategy"), f"{tp}.retryStrategy", name)
        res = t.get("resource") or {}
        for cond in ("successCondition", "failureCondition"):
            problem = _condition_problem(str(res[cond])) if res.get(cond) else None
            if problem:
                out.append(finding(name, f"{tp}.resource.{cond}", problem))
        if "dag" in t:
            out += _check_dag(t, tp, templates, (wf_params, undeclared), name)
    return out


def _condition_problem(condition: str) -> str | None:
    """Argo reads a resource condition as a Kubernetes label selector over the object's
    fields: comma-separated requirements ``key OP value`` (OP ``=``, ``==``, ``!=``, ``>``,
    ``<``), ``key in (v1, v2)`` / ``key notin (...)``, ``key`` or ``!key``."""
    plain = PLACEHOLDER.sub("x", condition)
    for req in split_requirements(plain):
        if not _REQUIREMENT.fullmatch(req):
            part = "" if req.strip() == plain.strip() else f" (in {req.strip()!r})"
            return (
                f"resource condition {condition!r} is not supported{part}: write requirements "
                "'key OP value' (OP one of =, ==, !=, >, <), 'key in (a,b)', "
                "'key notin (a,b)', 'key' or '!key', separated by commas"
            )
    return None


def _undeclared_workflow_parameter(
    ref: str, path: str, name: str, severity: Literal["error", "warning"]
) -> FieldError:
    if severity == "warning":
        return finding(
            name,
            path,
            f"{{{{workflow.parameters.{ref}}}}} is not declared here (spec.arguments."
            "parameters): the Workflow that uses this template must supply it",
            "warning",
        )
    return finding(
        name,
        path,
        f"{{{{workflow.parameters.{ref}}}}} is not a workflow parameter "
        "(spec.arguments.parameters)",
    )


def _check_retry(rs: Mapping[str, Any] | None, path: str, name: str) -> list[FieldError]:
    if not rs:
        return []
    out = []
    policy = rs.get("retryPolicy")
    if policy is not None and policy not in RETRY_POLICIES:
        out.append(
            finding(
                name,
                f"{path}.retryPolicy",
                f"{policy!r} is not one of {', '.join(sorted(RETRY_POLICIES))}",
            )
        )
    limit = rs.get("limit")
    if limit is not None and not (
        isinstance(limit, int) or str(limit).isdigit() or "{{" in str(limit)
    ):
        out.append(finding(name, f"{path}.limit", f"{limit!r} is not a number"))
    return out


def _check_dag(
    t: Mapping[str, Any],
    tp: str,
    templates: Mapping[Any, Any],
    params: tuple[set[Any], Literal["error", "warning"]],
    name: str,
) -> list[FieldError]:
    """``params``: the declared workflow parameters, and the severity of an undeclared one."""
    wf_params, undeclared = params
    out: list[FieldError] = []
    tasks = (t.get("dag") or {}).get("tasks") or []
    by_name = {task.get("name"): task for task in tasks}
    graph: dict[str, set[str]] = {}
    for j, task in enumerate(tasks):
        path = f"{tp}.dag.tasks[{j}]"
        tname = str(task.get("name", ""))
        if not _NAME.match(tname):
            out.append(finding(name, f"{path}.name", f"invalid task name {tname!r}"))
        if task.get("template") and task["template"] not in templates:
            out.append(
                finding(name, f"{path}.template", f"template {task['template']!r} does not exist")
            )
        field = f"{path}.depends" if task.get("depends") else f"{path}.dependencies"
        try:
            deps = set(task_depends(task, where=f"task {tname!r}").tasks)
        except UnsupportedConstruct as e:
            out.append(finding(name, field, str(e)))
            deps = set()
        for d in sorted(deps):
            if d not in by_name:
                out.append(
                    finding(
                        name,
                        field,
                        f"depends on task {d!r}, which does not exist in this DAG",
                    )
                )
        graph[tname] = {d for d in deps if d in by_name}
        for spath, text in _strings(task, path):
            for family, ref_task, ref in _refs(text):
                if family == "workflow.parameters" and ref not in wf_params:
                    out.append(_undeclared_workflow_parameter(ref, spath, name, undeclared))
                if ref_task is not None:
                    out += _check_task_output(ref_task, ref, by_name, templates, spath, name)
    cycle = _cycle(graph)
    if cycle:
        out.append(finding(name, f"{tp}.dag", "dependency cycle: " + " -> ".join(cycle)))
    return out


def _check_task_output(
    task: str,
    param: str,
    by_name: Mapping[Any, Any],
    templates: Mapping[Any, Any],
    path: str,
    name: str,
) -> list[FieldError]:
    if task not in by_name:
        return [finding(name, path, f"refers to outputs of task {task!r}, which does not exist")]
    tmpl = templates.get(by_name[task].get("template")) or by_name[task].get("inline")
    if tmpl is None:  # a templateRef: its outputs are in another WorkflowTemplate
        return []
    outs = {p.get("name") for p in (tmpl.get("outputs") or {}).get("parameters") or []}
    if param not in outs:
        return [finding(name, path, f"task {task!r} has no output parameter {param!r}")]
    return []


def _cycle(graph: Mapping[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return []
