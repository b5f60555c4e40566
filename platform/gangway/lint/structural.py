"""Structural validation of an object against its CRD's schema (jsonschema)."""

from __future__ import annotations

import re
from typing import Any

from jsonschema.exceptions import ValidationError

from gangway.lint._findings import Finding, path_str
from gangway.lint.crds import CrdSchemas

__all__ = ["validate_structure"]

_UNEXPECTED = re.compile(r"\('(.+?)' (?:was|were) unexpected\)")


def _message(err: ValidationError) -> tuple[str, str]:
    path = path_str(err.absolute_path)
    if err.validator == "additionalProperties":
        m = _UNEXPECTED.search(err.message)
        field = m.group(1) if m else "?"
        where = f"{path}.{field}" if path else field
        return where, f"unknown field {field!r}; remove it or fix the spelling"
    if err.validator == "required":
        return path, f"{err.message}; add it"
    if err.validator == "anyOf":
        return path, f"{err.instance!r} is not an integer or a string"
    if err.validator == "type":
        return path, f"{err.instance!r} is not of type {err.validator_value}"
    if err.validator == "enum":
        return path, f"{err.instance!r} is not one of {err.validator_value}"
    return path, err.message


def validate_structure(obj: dict[str, Any], schemas: CrdSchemas, name: str) -> list[Finding]:
    """Every schema violation of ``obj``, each with its field path."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    validator = schemas.validator(*key)
    if validator is None:
        return [
            Finding(
                name,
                "apiVersion",
                f"no CRD for {key[0]} {key[1]} in {schemas.source}; "
                "install the CRD or pass --crds with it",
            )
        ]
    findings = []
    errors = validator.iter_errors(obj)
    for err in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        path, msg = _message(err)
        findings.append(Finding(name, path, msg))
    return findings
