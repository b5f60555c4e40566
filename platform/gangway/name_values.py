"""``NAME=VALUE`` pairs from a command line: ``gangway … -p name=value`` and a step's
``--set key=value`` are read by this one function."""

from __future__ import annotations

from collections.abc import Iterable

from gangway.errors import PermanentError

__all__ = ["parse_assignments"]


def parse_assignments(items: Iterable[str] | None, *, flag: str, example: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}``; the last value of a name wins (as with
    ``argo submit -p``); spaces around a name are dropped. An item without ``=`` or without a
    name is a user error naming ``flag`` and showing ``example``."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise PermanentError(f"{flag} {item!r}: expected NAME=VALUE, e.g. {example}")
        out[name.strip()] = value
    return out
