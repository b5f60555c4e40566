"""Reading a step's log for what went wrong: the ``error:`` line a step prints
(:func:`gangway.step.main_wrapper`) is what the user must fix."""

from __future__ import annotations

__all__ = ["error_summary"]


def error_summary(lines: list[str]) -> str | None:
    """The last ``error:`` line of a log, with the items of a multi-line one (indented lines
    after a line ending in ':'), and nothing of a traceback that may follow."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    if not starts:
        return None
    i = starts[-1]
    detail = [lines[i]]
    if lines[i].endswith(":"):
        for ln in lines[i + 1 : i + 6]:
            if not ln.startswith("  ") or ln.lstrip().startswith("File "):
                break
            detail.append(ln.strip())
    return " ".join(detail)[:400]
