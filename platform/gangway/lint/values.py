"""The values a user supplies (``-p name=value``), checked as they will be substituted.

First by the pipeline's typed parameters (:mod:`gangway.params`): a value of the wrong type,
out of bounds or not among the allowed ones is refused with what is allowed.

Argo fills placeholders into a resource template's manifest as text, so a value can change
what a manifest *is*, not just what it says. Before anything runs or is sent, ``gangway run``,
``submit`` and ``lint`` fill every manifest with the supplied values the way Argo will and lint
the result (see :func:`gangway.argo.manifests.fill_manifest` for the structure check); a finding
that the defaults do not have is the values' doing, and is reported with the parameter named.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gangway.argo.references import declared_parameters, parameters_taken
from gangway.errors import FieldError, PermanentError, closest
from gangway.lint import CrdSchemas, lint_manifest
from gangway.lint._findings import finding
from gangway.params import check_values as typed_problems
from gangway.workflows.compiler import check_parameter_names

__all__ = ["ValueFinding", "check_values", "refuse_bad_values", "with_values"]


@dataclass(frozen=True)
class ValueFinding:
    """A lint error that appears only with the supplied values, and the parameters causing it."""

    parameters: tuple[str, ...]
    finding: FieldError
    sources: Mapping[str, str] = field(default_factory=dict)
    """How a parameter was set when not by ``-p`` (e.g. ``storage-root`` from --state-dir)."""

    def __str__(self) -> str:
        names = ", ".join(
            f"{self.sources[p]} (parameter {p})" if p in self.sources else f"-p {p}"
            for p in self.parameters
        )
        names = names or "the supplied values together"
        f = self.finding
        if not f.obj:  # about the value itself, not about a manifest
            return f"{names}: {f.message}"
        return f"{names}: {f.obj}: {f.path or '(root)'}: {f.message}"


NESTED = (
    "contains '{{': Argo would expand it as a placeholder where the value lands (another "
    "parameter, an expression), out of reach of every check; write the value itself"
)


def _arguments(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.setdefault("spec", {})
    if obj.get("kind") == "CronWorkflow":
        spec = spec.setdefault("workflowSpec", {})
    params: list[dict[str, Any]] = spec.setdefault("arguments", {}).setdefault("parameters", [])
    return params


def _unknown(name: str, declared: set[str]) -> str:
    near = closest(name, declared)
    hint = f" (did you mean {near}?)" if near else ""
    return f"unknown parameter{hint}; {parameters_taken(declared)}"


def with_values(obj: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``obj`` whose workflow parameters hold ``values``; unknown names are an error."""
    check_parameter_names(dict(obj), values)
    out = copy.deepcopy(dict(obj))
    params = {p.get("name"): p for p in _arguments(out)}
    for name, value in values.items():
        params[name]["value"] = str(value)
    return out


def _errors(
    obj: Mapping[str, Any], schemas: CrdSchemas | None, platform: bool
) -> dict[tuple[str, str], FieldError]:
    found = lint_manifest(obj, schemas, platform=platform)
    return {(f.obj, f.path): f for f in found if f.severity == "error"}


def check_values(
    obj: Mapping[str, Any],
    values: Mapping[str, str],
    schemas: CrdSchemas | None,
    *,
    platform: bool = True,
) -> list[ValueFinding]:
    """Every lint error the supplied ``values`` cause (absent with the defaults), each with the
    parameter that causes it — or with none, when only the values together cause it.
    ``platform=False`` leaves the platform rules out, as :func:`gangway.lint.lint_manifest`."""
    if not values:
        return []
    declared = declared_parameters(dict(obj))
    typed = [
        ValueFinding((k,), finding("", f"parameter {k}", _unknown(k, declared)))
        for k in values
        if k not in declared
    ]
    typed += [
        ValueFinding((k,), finding("", f"parameter {k}", why))
        for k, why in typed_problems(obj, values)
    ]
    if typed:  # a value of the wrong type or out of range: say so before any manifest is filled
        return typed
    defaults = {str(p.get("name")): str(p.get("value", "")) for p in _arguments(dict(obj))}
    changed = {k: v for k, v in values.items() if defaults.get(k) != v}
    # Argo expands a placeholder inside a value where the value lands (inputs of a template,
    # then its manifest): a value must not carry one, or it escapes every check here.
    nested = [
        ValueFinding((k,), finding("", f"parameter {k}", NESTED))  # the value, not a manifest
        for k, v in changed.items()
        if "{{" in v
    ]
    if nested:
        return nested
    base = _errors(obj, schemas, platform) if changed else {}
    out: list[ValueFinding] = []
    for name, value in changed.items():
        errs = _errors(with_values(obj, {name: value}), schemas, platform)
        out += [ValueFinding((name,), f) for k, f in errs.items() if k not in base]
    if len(changed) > 1:
        seen = base.keys() | {(v.finding.obj, v.finding.path) for v in out}
        together = _errors(with_values(obj, changed), schemas, platform)
        out += [ValueFinding((), f) for k, f in together.items() if k not in seen]
    return out


def values_check(
    schemas: CrdSchemas | None,
) -> Callable[[Mapping[str, Any], Mapping[str, str], Mapping[str, str]], None]:
    """:func:`refuse_bad_values` against ``schemas``: the check ``gangway run`` gives
    :func:`gangway.local.run_pipeline`."""

    def check(
        obj: Mapping[str, Any], values: Mapping[str, str], sources: Mapping[str, str]
    ) -> None:
        refuse_bad_values(obj, values, schemas, sources)

    return check


def refuse_bad_values(
    obj: Mapping[str, Any],
    values: Mapping[str, str],
    schemas: CrdSchemas | None,
    sources: Mapping[str, str] | None = None,
) -> None:
    """Raise one error listing every value that would break or rewrite a manifest.

    ``sources`` says how a parameter was set when it was not by ``-p`` (it is named so).
    """
    found = [replace(v, sources=sources or {}) for v in check_values(obj, values, schemas)]
    if found:
        lines = "\n".join(f"  {v}" for v in found)
        raise PermanentError(
            f"parameter value(s) refused, nothing was run or sent:\n{lines}\n"
            "fix these values and run again"
        )
