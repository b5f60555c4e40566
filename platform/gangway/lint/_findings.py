"""What lint reports: a :class:`~gangway.errors.FieldError` per problem — the object, the field
path and a fix — made by :func:`finding` in lint's own argument order."""

from __future__ import annotations

from typing import Literal

from gangway.errors import FieldError

__all__ = ["finding", "path_str"]


def finding(
    obj: str, path: str, message: str, severity: Literal["error", "warning"] = "error"
) -> FieldError:
    """A lint finding: ``obj`` names the object (``WorkflowTemplate/x``, ``Volcano Job in
    template train``), ``path`` the field in it, ``message`` what is wrong and what to do."""
    return FieldError(path, message, obj=obj, severity=severity)


def path_str(parts: object) -> str:
    """``["spec", "templates", 3, "name"]`` → ``spec.templates[3].name``."""
    out = ""
    for p in parts:  # type: ignore[attr-defined]
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
