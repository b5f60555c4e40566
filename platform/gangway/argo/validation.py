"""What Argo refuses before a workflow runs, checked without its CRDs: each field the linter and
the local executor read holds the type Argo's Go types declare (a list, a mapping, text, a
number), no template, task or step has a field Argo does not know (``argo lint`` and ``argo
submit`` are strict by default), and a template's ``timeout`` is one Argo takes.

A malformed file is a list of :class:`~gangway.errors.FieldError` — every problem at once,
each at its path — never a crash in code that trusted its shape. The field names are Argo
v4.1.2's (``tests/unit/argo/test_validation.py`` compares them with the CRDs when they are at hand).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gangway.errors import FieldError, closest

__all__ = [
    "CONTAINER_KEYS",
    "DAG_TASK_KEYS",
    "IO_KEYS",
    "PARAMETER_KEYS",
    "SPEC_KEYS",
    "STEP_KEYS",
    "TEMPLATE_KEYS",
    "VALUE_FROM_KEYS",
    "shape_problems",
    "timeout_problems",
    "validation_problems",
]

TEMPLATE_KEYS = frozenset(
    [
        "activeDeadlineSeconds",
        "affinity",
        "annotations",
        "archiveLocation",
        "automountServiceAccountToken",
        "container",
        "containerSet",
        "daemon",
        "dag",
        "data",
        "executor",
        "failFast",
        "hostAliases",
        "http",
        "initContainers",
        "inputs",
        "memoize",
        "metadata",
        "metrics",
        "name",
        "nodeSelector",
        "outputs",
        "parallelism",
        "pendingTimeout",
        "plugin",
        "podResources",
        "podSpecPatch",
        "priorityClassName",
        "resource",
        "resourceClaims",
        "retryStrategy",
        "schedulerName",
        "script",
        "securityContext",
        "serviceAccountName",
        "sidecars",
        "steps",
        "suspend",
        "synchronization",
        "timeout",
        "tolerations",
        "volumes",
    ]
)
"""The fields of Argo's ``Template``."""
STEP_KEYS = frozenset(
    [
        "arguments",
        "continueOn",
        "hooks",
        "inline",
        "name",
        "onExit",
        "template",
        "templateRef",
        "when",
        "withItems",
        "withParam",
        "withSequence",
    ]
)
"""The fields of a step (``WorkflowStep``)."""
DAG_TASK_KEYS = STEP_KEYS | {"dependencies", "depends"}
"""The fields of a DAG task (``DAGTask``)."""
CONTAINER_KEYS = frozenset(
    [
        "args",
        "command",
        "env",
        "envFrom",
        "image",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "name",
        "ports",
        "readinessProbe",
        "resizePolicy",
        "resources",
        "restartPolicy",
        "restartPolicyRules",
        "securityContext",
        "startupProbe",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    ]
)
"""The fields of a container (Kubernetes' ``Container``; a script adds ``source``)."""
SPEC_KEYS = frozenset(
    [
        "activeDeadlineSeconds",
        "affinity",
        "archiveLogs",
        "arguments",
        "artifactGC",
        "artifactRepositoryRef",
        "automountServiceAccountToken",
        "dnsConfig",
        "dnsPolicy",
        "entrypoint",
        "executor",
        "executorPlugins",
        "hooks",
        "hostAliases",
        "hostNetwork",
        "imagePullSecrets",
        "metrics",
        "nodeSelector",
        "onExit",
        "parallelism",
        "podDisruptionBudget",
        "podGC",
        "podMetadata",
        "podPriorityClassName",
        "podResources",
        "podSpecPatch",
        "priority",
        "resourceClaims",
        "retryStrategy",
        "schedulerName",
        "securityContext",
        "serviceAccountName",
        "shutdown",
        "suspend",
        "synchronization",
        "templateDefaults",
        "templates",
        "tolerations",
        "ttlStrategy",
        "volumeClaimGC",
        "volumeClaimTemplates",
        "volumes",
        "workflowMetadata",
        "workflowTemplateRef",
    ]
)
"""The fields of a workflow's ``spec`` (``WorkflowSpec``)."""
IO_KEYS = {
    "inputs": frozenset({"artifacts", "parameters"}),
    "outputs": frozenset({"artifacts", "exitCode", "parameters", "result"}),
    "arguments": frozenset({"artifacts", "parameters"}),
}
"""The fields of a template's ``inputs`` and ``outputs``, and of a call's ``arguments``."""
PARAMETER_KEYS = frozenset(
    ["default", "description", "enum", "globalName", "name", "value", "valueFrom"]
)
"""The fields of a ``Parameter`` (an input, output or argument)."""
VALUE_FROM_KEYS = frozenset(
    [
        "configMapKeyRef",
        "default",
        "event",
        "expression",
        "jqFilter",
        "jsonPath",
        "parameter",
        "path",
        "supplied",
    ]
)
"""The fields of a parameter's ``valueFrom`` (``ValueFrom``)."""

Kind = Literal["str", "int", "bool", "map", "list", "any", "int_or_str", "scalar"]
_SAYS = {
    "str": "text",
    "int": "a whole number",
    "bool": "true or false",
    "map": "a mapping",
    "list": "a list",
    "int_or_str": "a whole number or text",
    "scalar": "a value (text, a number or true/false)",
}


@dataclass(frozen=True)
class _Type:
    """The shape of one field: its kind; for a list, its items'; for a mapping, the shapes of
    the fields it has (``fields``), every field it may have (``known``) and must have."""

    kind: Kind
    items: _Type | None = None
    fields: Mapping[str, _Type] = field(default_factory=dict)
    known: frozenset[str] | None = None
    required: tuple[str, ...] = ()
    minimum: int | None = None


def _map(
    known: frozenset[str] | None = None,
    required: tuple[str, ...] = (),
    fields: Mapping[str, _Type] | None = None,
    **more: _Type,
) -> _Type:
    return _Type("map", fields={**(fields or {}), **more}, known=known, required=required)


def _list(items: _Type) -> _Type:
    return _Type("list", items=items)


STR, INT, BOOL, ANY = _Type("str"), _Type("int"), _Type("bool"), _Type("any")
MAP, SCALAR, INT_OR_STR = _Type("map"), _Type("scalar"), _Type("int_or_str")
_PARAM = _map(
    PARAMETER_KEYS,
    required=("name",),
    name=STR,
    value=SCALAR,
    default=SCALAR,
    enum=_list(SCALAR),
    description=STR,
    globalName=STR,
    valueFrom=_map(VALUE_FROM_KEYS),
)
_ARTIFACT = _map(required=("name",), name=STR, path=STR, optional=BOOL, mode=INT)
_IO_FIELDS = {"parameters": _list(_PARAM), "artifacts": _list(_ARTIFACT)}
_INPUTS = _map(IO_KEYS["inputs"], fields=_IO_FIELDS)
_OUTPUTS = _map(IO_KEYS["outputs"], fields=_IO_FIELDS, result=STR, exitCode=STR)
_ARGUMENTS = _map(IO_KEYS["arguments"], fields=_IO_FIELDS)
_ENV = _map(required=("name",), name=STR, value=STR, valueFrom=MAP)
_CONTAINER_FIELDS = {
    "name": STR,
    "image": STR,
    "command": _list(STR),
    "args": _list(STR),
    "env": _list(_ENV),
    "envFrom": _list(MAP),
    "workingDir": STR,
    "volumeMounts": _list(MAP),
    "resources": MAP,
    "securityContext": MAP,
}
_CONTAINER = _map(CONTAINER_KEYS, fields=_CONTAINER_FIELDS)
_USER_CONTAINER = _map(CONTAINER_KEYS | {"mirrorVolumeMounts"}, fields=_CONTAINER_FIELDS)
"""A sidecar or init container (Argo's ``UserContainer``)."""
_CONTAINER_NODE = _map(
    CONTAINER_KEYS | {"dependencies"}, fields=_CONTAINER_FIELDS, dependencies=_list(STR)
)
"""A container of a ``containerSet`` (Argo's ``ContainerNode``)."""
_SCRIPT = _map(CONTAINER_KEYS | {"source"}, fields=_CONTAINER_FIELDS, source=STR)
_RETRY = _map(
    frozenset({"affinity", "backoff", "expression", "limit", "retryPolicy"}),
    limit=INT_OR_STR,
    retryPolicy=STR,
    expression=STR,
    affinity=MAP,
    backoff=_map(
        frozenset({"cap", "duration", "factor", "maxDuration"}),
        duration=STR,
        factor=INT_OR_STR,
        maxDuration=STR,
        cap=STR,
    ),
)
_CALL_FIELDS = {
    "name": STR,
    "template": STR,
    "arguments": _ARGUMENTS,
    "withItems": _list(ANY),
    "withParam": STR,
    "withSequence": MAP,
    "when": STR,
    "continueOn": MAP,
    "hooks": MAP,
    "templateRef": MAP,
    "onExit": STR,
}
# ``inline`` is a whole template: checked by _template, not through these tables.
_STEP = _map(STEP_KEYS, ("name",), _CALL_FIELDS)
_TASK = _map(DAG_TASK_KEYS, ("name",), _CALL_FIELDS, depends=STR, dependencies=_list(STR))
_TEMPLATE_FIELDS = {
    "name": STR,
    "container": _CONTAINER,
    "script": _SCRIPT,
    "containerSet": _map(containers=_list(_CONTAINER_NODE), volumeMounts=_list(MAP)),
    "dag": _map(
        frozenset({"failFast", "target", "tasks"}), tasks=_list(_TASK), target=STR, failFast=BOOL
    ),
    "steps": _list(_list(_STEP)),
    "inputs": _INPUTS,
    "outputs": _OUTPUTS,
    "parallelism": _Type("int", minimum=1),
    "retryStrategy": _RETRY,
    "timeout": STR,
    "activeDeadlineSeconds": INT_OR_STR,
    "failFast": BOOL,
    "daemon": BOOL,
    "sidecars": _list(_USER_CONTAINER),
    "initContainers": _list(_USER_CONTAINER),
    "suspend": MAP,
    "resource": MAP,
    "volumes": _list(MAP),
    "nodeSelector": MAP,
    "podSpecPatch": STR,
    "memoize": MAP,
    "metadata": MAP,
    "synchronization": MAP,
}
_TEMPLATE = _map(TEMPLATE_KEYS, fields=_TEMPLATE_FIELDS)
_SPEC_FIELDS = {
    "templates": ANY,  # each one by _template
    "templateDefaults": ANY,
    "entrypoint": STR,
    "onExit": STR,
    "arguments": _ARGUMENTS,
    "parallelism": _Type("int", minimum=1),
    "retryStrategy": _RETRY,
    "activeDeadlineSeconds": INT_OR_STR,
    "volumes": _list(MAP),
    "podSpecPatch": STR,
    "hooks": MAP,
    "nodeSelector": MAP,
    "serviceAccountName": STR,
}


def validation_problems(spec: Mapping[str, Any], base: str = "spec") -> list[FieldError]:
    """What Argo's validation refuses in a workflow ``spec`` (at ``base``): its shape
    (:func:`shape_problems`), then — once every template is a mapping of the right fields —
    each template's timeout as written (``templateDefaults`` apply only where they can)."""
    found = shape_problems(spec, base)
    if found:
        return found
    for path, t in _templates(spec, base):
        found += timeout_problems(t, path) + _limit_problems(t.get("retryStrategy"), path)
    return found + _limit_problems(spec.get("retryStrategy"), base)


def _limit_problems(strategy: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """A ``retryStrategy.limit`` written as text that is no number (a placeholder is checked
    once it is filled)."""
    limit = (strategy or {}).get("limit")
    if not isinstance(limit, str) or "{{" in limit or not limit or limit.strip().isdigit():
        return []
    return [
        FieldError(
            f"{path}.retryStrategy.limit",
            f"{limit!r} is not a whole number of retries",
            "give one (0 or more), or leave limit out to retry until it succeeds",
        )
    ]


def _templates(spec: Mapping[str, Any], base: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Every template as written, inline ones included, with its path."""
    out = [(f"{base}.templates[{i}]", t) for i, t in enumerate(spec.get("templates") or [])]
    for path, t in list(out):
        out += _inline(t, path)
    return out


def _inline(t: Mapping[str, Any], path: str) -> list[tuple[str, Mapping[str, Any]]]:
    calls = [
        (c, f"{path}.dag.tasks[{i}]") for i, c in enumerate((t.get("dag") or {}).get("tasks") or [])
    ]
    calls += [
        (s, f"{path}.steps[{i}][{j}]")
        for i, group in enumerate(t.get("steps") or [])
        for j, s in enumerate(group)
    ]
    out = []
    for call, where in calls:
        if call.get("inline") is not None:
            out.append((f"{where}.inline", call["inline"]))
            out += _inline(call["inline"], f"{where}.inline")
    return out


def shape_problems(spec: Mapping[str, Any], base: str = "spec") -> list[FieldError]:
    """Every field of a workflow ``spec`` (at ``base``) whose type Argo would refuse, and every
    field of a template, task or step Argo does not know (with the name it likely meant)."""
    out: list[FieldError] = []
    _check(spec, _map(SPEC_KEYS, fields=_SPEC_FIELDS), base, out)
    templates = spec.get("templates")
    if templates is not None and not isinstance(templates, list):
        out.append(FieldError(f"{base}.templates", f"must be a list, not {_what(templates)}"))
    elif templates:
        for i, t in enumerate(templates):
            _template(t, f"{base}.templates[{i}]", out)
    defaults = spec.get("templateDefaults")
    if defaults is not None:
        _template(defaults, f"{base}.templateDefaults", out)
    return out


def _template(t: Any, path: str, out: list[FieldError]) -> None:
    """One template (a named one, ``templateDefaults`` or a task's ``inline``) and the inline
    templates in it."""
    if not isinstance(t, Mapping):
        out.append(FieldError(path, f"a template must be a mapping, not {_what(t)}"))
        return
    _check(t, _TEMPLATE, path, out)
    calls: list[tuple[Any, str]] = []
    tasks = (t.get("dag") or {}).get("tasks") if isinstance(t.get("dag"), Mapping) else None
    if isinstance(tasks, list):
        calls += [(task, f"{path}.dag.tasks[{i}]") for i, task in enumerate(tasks)]
    steps = t.get("steps")
    if isinstance(steps, list):
        calls += [
            (s, f"{path}.steps[{i}][{j}]")
            for i, group in enumerate(steps)
            if isinstance(group, list)
            for j, s in enumerate(group)
        ]
    for call, where in calls:
        if isinstance(call, Mapping) and call.get("inline") is not None:
            _template(call["inline"], f"{where}.inline", out)


def _check(value: Any, t: _Type, path: str, out: list[FieldError]) -> None:
    if value is None or t.kind == "any":
        return
    wrong = _wrong_kind(value, t)
    if wrong:
        out.append(FieldError(path, wrong))
        return
    if t.kind == "list" and t.items is not None:
        for i, item in enumerate(value):
            _check(item, t.items, f"{path}[{i}]", out)
    elif t.kind == "map":
        for key in t.required:
            if key not in value:
                out.append(FieldError(f"{path}.{key}", "missing; it is required"))
        for key, item in value.items():
            if t.known is not None and key not in t.known:
                near = closest(str(key), t.known)
                hint = f"did you mean {near!r}?" if near else f"known: {', '.join(sorted(t.known))}"
                out.append(FieldError(f"{path}.{key}", "unknown field (Argo refuses it)", hint))
            elif key in t.fields:
                _check(item, t.fields[key], f"{path}.{key}", out)


def _wrong_kind(value: Any, t: _Type) -> str | None:
    """Why ``value`` is not of kind ``t`` (None: it is)."""
    number = isinstance(value, int) and not isinstance(value, bool)
    ok = {
        "str": isinstance(value, str),
        "int": number,
        "bool": isinstance(value, bool),
        "map": isinstance(value, Mapping),
        "list": isinstance(value, list),
        "int_or_str": number or isinstance(value, str),
        "scalar": isinstance(value, str | int | float | bool),
    }[t.kind]
    if not ok:
        return f"must be {_SAYS[t.kind]}, not {_what(value)}"
    if t.minimum is not None and number and value < t.minimum:
        return f"must be at least {t.minimum}, not {value}"
    return None


def _what(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    return repr(value)


_LEAVES = ("container", "script", "containerSet", "resource", "suspend", "data", "http", "plugin")


def timeout_problems(t: Mapping[str, Any], path: str) -> list[FieldError]:
    """A template's ``timeout`` as Argo's validation takes it: only a leaf template (one that
    runs a pod or waits) has one, and it is a duration (``30s``, ``1h``), never a bare number.
    A value from a placeholder is checked once it is filled."""
    timeout = t.get("timeout")
    if not isinstance(timeout, str) or not timeout or "{{" in timeout:
        return []
    if not any(t.get(k) is not None for k in _LEAVES):
        kind = "dag" if t.get("dag") is not None else "steps"
        return [
            FieldError(
                f"{path}.timeout",
                f"a {kind} template does not take a timeout (Argo refuses it)",
                "put it on the templates its tasks run, or use activeDeadlineSeconds on the "
                "workflow",
            )
        ]
    if timeout.strip().lstrip("+-").isdigit():
        return [
            FieldError(
                f"{path}.timeout",
                f"{timeout!r} is a number, not a duration (Argo refuses it)",
                f"write it with a unit, e.g. {timeout.strip()}s",
            )
        ]
    return []
