"""Terminal output helpers shared by the command groups."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console", "err_console", "human_bytes"]

console = Console()
err_console = Console(stderr=True)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")
