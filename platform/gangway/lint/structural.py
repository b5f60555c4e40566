"""Structural validation of an object against its schema (jsonschema): its CRD's, else the
core Kubernetes kind's (:mod:`gangway.lint.core_kinds`); a kind with neither is a warning."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import ValidationError

from gangway.errors import FieldError, closest, describe
from gangway.lint._findings import finding, path_str
from gangway.lint.core_kinds import KUBERNETES_VERSION, core_validator
from gangway.lint.crds import CrdSchemas

__all__ = ["validate_structure"]


def _types(alternatives: Any) -> list[str]:
    """The JSON types a list of ``anyOf`` / ``oneOf`` schemas allows (null left out)."""
    out: list[str] = []
    for schema in alternatives if isinstance(alternatives, list) else []:
        t = schema.get("type") if isinstance(schema, dict) else None
        for name in t if isinstance(t, list) else [t]:
            if isinstance(name, str) and name != "null" and name not in out:
                out.append(name)
    return out


def _unknown_fields(err: ValidationError) -> list[tuple[str, str]]:
    """One (path, message) per field the schema does not allow, with the name it likely
    meant — jsonschema reports them all in one error, its message naming them in a list."""
    path = path_str(err.absolute_path)
    known = (
        set((err.schema or {}).get("properties") or {}) if isinstance(err.schema, dict) else set()
    )
    extra = [k for k in err.instance if k not in known] if isinstance(err.instance, dict) else []
    out = []
    for field in extra:
        near = closest(str(field), known)
        fix = f"did you mean {near!r}?" if near else "remove it or fix the spelling"
        out.append((f"{path}.{field}" if path else str(field), f"unknown field {field!r}; {fix}"))
    return out or [(path, err.message)]


def _message(err: ValidationError) -> tuple[str, str]:
    path = path_str(err.absolute_path)
    if err.validator == "required":
        return path, f"{err.message}; add it"
    if err.validator in ("anyOf", "oneOf") and (types := _types(err.validator_value)):
        if sorted(types) == ["integer", "string"]:
            return path, f"{err.instance!r} is not an integer or a string"
        return path, f"{err.instance!r} is not of type {' or '.join(types)}"
    if err.validator == "type":
        expected = err.validator_value
        if isinstance(expected, list):
            expected = " or ".join(str(t) for t in expected if t != "null")
        return path, f"{err.instance!r} is not of type {expected}"
    if err.validator == "enum":
        return path, f"{err.instance!r} is not one of {err.validator_value}"
    return path, err.message


def validate_structure(
    obj: dict[str, Any], schemas: CrdSchemas, name: str, *, partial: bool = False
) -> list[FieldError]:
    """Every schema violation of ``obj``, each with its field path; a warning when no schema
    knows its kind (its fields are then not checked). ``partial``: ``obj`` is a merge patch,
    whose fields must be the kind's but none is required."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    validator = schemas.validator(*key) or core_validator(*key)
    if validator is None:
        return [
            finding(
                name,
                "apiVersion",
                f"no schema for apiVersion {key[0]!r} kind {key[1]!r}: no CRD for it in "
                f"{schemas.source} and not a core Kubernetes {KUBERNETES_VERSION} kind, so its "
                "fields are not checked; install the CRD or pass --crds with it",
                severity="warning",
            )
        ]
    findings = []
    try:
        errors = list(validator.iter_errors(obj))
    except Exception as e:  # the schema itself (a $ref to nowhere): not the manifest's fault
        if schemas.validator(*key) is None:
            raise
        raise schemas.broken(*key, describe(e)) from None
    if partial:
        errors = [e for e in errors if e.validator != "required"]
    for err in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        said = _unknown_fields(err) if err.validator == "additionalProperties" else [_message(err)]
        findings += [finding(name, path, msg) for path, msg in said]
    return findings
