"""Errors grouped by what the caller should do, mapped onto the exit-code contract.

Every step process exits with one of these codes (``shared/DESIGN.md``, "Retries"):

* ``0``   success;
* ``1``   permanent error: bad config or bad data, retrying cannot help;
* ``75``  transient error the step detected itself (``EX_TEMPFAIL``): retry may succeed;
* ``143`` stopped by SIGTERM (preemption) after saving what it could.

Code never branches on message text: it raises the class that says what to do next.
"""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_PERMANENT",
    "EXIT_PREEMPTED",
    "EXIT_TRANSIENT",
    "GangwayError",
    "NotFoundError",
    "PermanentError",
    "Preempted",
    "TransientError",
]

EXIT_OK = 0
EXIT_PERMANENT = 1
EXIT_TRANSIENT = 75
EXIT_PREEMPTED = 143


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
