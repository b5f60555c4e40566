"""Errors grouped by what the caller should do, mapped onto the exit-code contract.

Every step process exits with one of these codes (:mod:`gangway.contract`):

* ``0``   success;
* ``1``   permanent error: bad config or bad data, retrying cannot help;
* ``75``  transient error the step detected itself (``EX_TEMPFAIL``): retry may succeed;
* ``143`` stopped by SIGTERM (preemption) after saving what it could.

Gangway's own code raises the class that says what to do next and never branches on the text
of its own messages. (Reading a failure Gangway did not raise is another matter:
``components/failures.py`` classes gloo's and CUDA's errors by their words, because those
libraries give no other handle; it says so where it does.)

A problem with one field of what a user wrote is a :class:`FieldError` — where it is (its
field path), what is wrong, what to do — and every problem of a document is reported at once
(:class:`FieldErrors`), as Kueue's ``field.ErrorList``: config, snapshots, eval suites, lint
findings, admission's rejections, a step's flags and ``-p`` values all use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gangway.contract import EXIT_PERMANENT, EXIT_PREEMPTED, EXIT_TRANSIENT

__all__ = [
    "FieldError",
    "FieldErrors",
    "GangwayError",
    "Interrupted",
    "NotFoundError",
    "PermanentError",
    "Preempted",
    "TransientError",
    "UnsupportedConstruct",
    "chosen_cluster",
    "closest",
    "describe",
    "field_errors",
    "validation_errors",
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


class UnsupportedConstruct(PermanentError):
    """A workflow uses an Argo construct (a field, an expression, a condition) that Gangway
    does not evaluate, or one this machine cannot run; the message names it and where it is."""


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


@dataclass(frozen=True)
class FieldError:
    """One thing wrong with one field of what a user wrote: its path as they would write it
    (``teams.research.capability.gpu``, ``spec.templates[3].name``, ``--steps``, ``-p nodes``),
    what is wrong, and what to do about it. ``obj`` names the object it is in where one report
    covers several (lint: ``WorkflowTemplate/x``); a ``warning`` does not stop anything."""

    path: str
    message: str
    hint: str = ""
    obj: str = ""
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        text = f"{self.path or '(root)'}: {self.message}"
        text += f"; {self.hint}" if self.hint else ""
        return f"{self.severity}: {self.obj}: {text}" if self.obj else text


class FieldErrors(PermanentError):
    """Every problem found in one document, reported at once: ``WHERE: N problem(s):`` and a
    line each (:class:`FieldError`)."""

    def __init__(self, where: str, errors: Sequence[FieldError]) -> None:
        self.where = where
        self.errors = list(errors)
        lines = "\n  ".join(str(e) for e in self.errors)
        super().__init__(f"{where}: {len(self.errors)} problem(s):\n  {lines}")


def validation_errors(
    e: Any,
    *,
    root: str,
    path: Callable[[tuple[Any, ...]], str] | None = None,
    hint: Callable[[dict[str, Any]], str] | None = None,
) -> list[FieldError]:
    """A pydantic ``ValidationError`` as field errors: each error's location as a dotted path
    (or as ``path`` spells it; ``root`` when it names no field), its message, and ``hint``'s
    advice for it."""
    spell = path or (lambda loc: ".".join(str(x) for x in loc))
    return [
        FieldError(
            (spell(tuple(err["loc"])) if err["loc"] else "") or root,
            err["msg"],
            hint(err) if hint else "",
        )
        for err in e.errors()
    ]


def field_errors(
    e: Any,
    *,
    root: str,
    limit: int | None = None,
    path: Callable[[tuple[Any, ...]], str] | None = None,
) -> str:
    """A pydantic ``ValidationError`` on one line, ``field.path: message; …`` (``root`` names
    the whole document when a message has no field; ``path`` spells a location otherwise, e.g.
    as a flag), at most ``limit`` of them."""
    return "; ".join(str(f) for f in validation_errors(e, root=root, path=path)[:limit])


def closest(name: str, known: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The known name ``name`` most likely meant — the same but for case, else the nearest
    spelling (:func:`difflib.get_close_matches`) — for "did you mean" hints; None if none."""
    import difflib

    names = sorted(known)
    same = [k for k in names if k.lower() == name.lower()]
    near = same or difflib.get_close_matches(name, names, n=1, cutoff=cutoff)
    return near[0] if near else None


def chosen_cluster(cluster: str | None, known: Iterable[str], source: str) -> str:
    """``--cluster``'s value checked against the clusters ``source`` has (``the config``, ``the
    snapshot``): the only one when not given; else one line naming them, with the nearest."""
    names = sorted(known)
    if cluster is None and len(names) == 1:
        return names[0]
    if cluster in names:
        return cluster
    near = closest(cluster or "", names)
    hint = f"; did you mean {near!r}?" if near else ""
    what = f"--cluster {cluster}: not in {source}" if cluster else "give --cluster"
    raise PermanentError(f"{what} (one of {', '.join(names)}){hint}")
