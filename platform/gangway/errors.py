"""Errors grouped by what the caller should do, mapped onto the exit-code contract.

Every step process exits with one of these codes (:mod:`gangway.contract`):

* ``0``   success;
* ``1``   permanent error: bad config or bad data, retrying cannot help;
* ``75``  transient error the step detected itself (``EX_TEMPFAIL``): retry may succeed;
* ``143`` stopped by SIGTERM (preemption) after saving what it could.

Code never branches on message text: it raises the class that says what to do next.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gangway.contract import EXIT_PERMANENT, EXIT_PREEMPTED, EXIT_TRANSIENT

__all__ = [
    "GangwayError",
    "Interrupted",
    "NotFoundError",
    "PermanentError",
    "Preempted",
    "TransientError",
    "closest",
    "describe",
    "field_errors",
]


class GangwayError(Exception):
    """Base of every error Gangway reports to a user. The message says what to do next."""

    exit_code = EXIT_PERMANENT


class PermanentError(GangwayError):
    """Bad input, bad config or bad data: retrying the same step cannot help."""

    exit_code = EXIT_PERMANENT


class NotFoundError(PermanentError):
    """A URI, file or key that the step needs does not exist."""


class TransientError(GangwayError):
    """A failure that may go away on retry (a 5xx, a timeout, a refused connection)."""

    exit_code = EXIT_TRANSIENT


class Preempted(GangwayError):
    """The step received SIGTERM and stopped after saving what it could."""

    exit_code = EXIT_PREEMPTED


class Interrupted(GangwayError):
    """The user stopped a command (Ctrl-C or SIGTERM) before it wrote anything."""

    exit_code = 130


def describe(e: BaseException) -> str:
    """``e`` in one line for a user: a Gangway error's own message (it says what to do), any
    other as its type and the first line of its text."""
    if isinstance(e, GangwayError):
        return str(e)
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def field_errors(e: Any, *, root: str, limit: int | None = None) -> str:
    """A pydantic ``ValidationError`` as ``field.path: message; …`` (``root`` names the whole
    document when a message has no field), at most ``limit`` of them."""
    errors = e.errors()[:limit]
    return "; ".join(
        f"{'.'.join(str(x) for x in err['loc']) or root}: {err['msg']}" for err in errors
    )


def closest(name: str, known: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The known name ``name`` most likely meant — the same but for case, else the nearest
    spelling (:func:`difflib.get_close_matches`) — for "did you mean" hints; None if none."""
    import difflib

    names = sorted(known)
    same = [k for k in names if k.lower() == name.lower()]
    near = same or difflib.get_close_matches(name, names, n=1, cutoff=cutoff)
    return near[0] if near else None
