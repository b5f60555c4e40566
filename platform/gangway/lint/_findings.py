"""What lint reports: one finding per problem, with the object, the field path and a fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Finding", "path_str"]


@dataclass(frozen=True)
class Finding:
    """``obj`` names the object (``WorkflowTemplate/x``, ``Volcano Job in template train``)."""

    obj: str
    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.obj}: {self.path or '(root)'}: {self.message}"


def path_str(parts: object) -> str:
    """``["spec", "templates", 3, "name"]`` → ``spec.templates[3].name``."""
    out = ""
    for p in parts:  # type: ignore[attr-defined]
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
