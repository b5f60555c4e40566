"""A pod's deadline, locally, as Argo's controller sets ``activeDeadlineSeconds`` on the pod it
creates for a container, script or containerSet template.

- The template's ``activeDeadlineSeconds`` is the pod's.
- Its ``timeout`` (a Go duration, ``10s`` ``1m30s``, counted from the node's start; a
  whole number is refused by Argo's validation) replaces it: the pod gets the *whole* seconds
  left of the timeout when it is created — a ``10s`` timeout gives a pod of 9 s — and with 1 s
  or less left the pod is not created: the node errors ``NODE exceeded its deadline``.
  Templates without a pod (DAG, steps, suspend) have no deadline from ``timeout``.

The deadline covers the whole pod: init containers, the main container, each container of a
containerSet. When it passes, the node fails with Kubernetes' message (:data:`DEADLINE`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.argo.substitution import substitute
from gangway.errors import PermanentError

__all__ = ["DEADLINE", "NoPod", "PodDeadline", "go_duration", "pod_deadline"]

DEADLINE = "Pod was active on the node longer than the specified deadline"
"""Kubernetes' message for a pod stopped by its ``activeDeadlineSeconds``."""
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?")
_UNIT = re.compile(r"[^\d.]*")


class NoPod(Exception):
    """Argo creates no pod (its ``timeout`` does not parse, or leaves no time): the node is
    an Error with this message."""


@dataclass(frozen=True)
class PodDeadline:
    """When the pod must have ended (monotonic seconds), or None: no deadline."""

    end: float | None = None

    def left(self) -> float | None:
        """Seconds left (0 once passed), or None without a deadline."""
        return None if self.end is None else max(0.0, self.end - time.monotonic())


def go_duration(text: str) -> float:
    """Seconds in ``text``, read as Go's ``time.ParseDuration`` reads it; a ``ValueError``
    with Go's message when it does not parse."""
    rest = text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f'time: invalid duration "{text}"')
    total = 0.0
    while rest:
        number = _NUMBER.match(rest)
        assert number is not None  # the pattern matches the empty string
        whole, frac = number.group(1), number.group(2)
        if not whole and not frac:
            raise ValueError(f'time: invalid duration "{text}"')
        rest = rest[number.end() :]
        unit = _UNIT.match(rest)
        assert unit is not None
        if not unit.group(0):
            raise ValueError(f'time: missing unit in duration "{text}"')
        if unit.group(0) not in _UNITS:
            raise ValueError(f'time: unknown unit "{unit.group(0)}" in duration "{text}"')
        rest = rest[unit.end() :]
        total += float(f"{whole or 0}.{frac or 0}") * _UNITS[unit.group(0)]
    return -total if text.startswith("-") else total


def pod_deadline(
    template: Mapping[str, Any], scope: Mapping[str, str], *, started: float, node: str
) -> PodDeadline:
    """The deadline of the pod of ``template``'s node ``node``, which started at ``started``
    (monotonic seconds); :class:`NoPod` when its ``timeout`` does not parse or leaves no
    time for the pod."""
    where = f"template {template.get('name')}"
    raw = template.get("timeout")
    if raw not in (None, ""):
        value = substitute(str(raw), scope, where=f"{where}.timeout")
        if re.fullmatch(r"[+-]?\d+", value):  # Argo's validation: not a bare number
            raise PermanentError(
                f"{where}.timeout: {value!r} has no unit; write a duration such as 10s or 1m"
            )
        try:
            seconds = go_duration(value)
        except ValueError as e:
            raise NoPod(f"invalid timeout format. {e}") from None
        left = int(seconds - (time.monotonic() - started))  # Go's int64(): toward zero
        if left <= 1:
            raise NoPod(f"{node} exceeded its deadline")
        return PodDeadline(time.monotonic() + left)
    raw = template.get("activeDeadlineSeconds")
    if raw in (None, ""):
        return PodDeadline()
    value = substitute(str(raw), scope, where=f"{where}.activeDeadlineSeconds")
    try:
        return PodDeadline(time.monotonic() + float(value))
    except ValueError:
        raise PermanentError(
            f"{where}.activeDeadlineSeconds: {value!r} is not a number of seconds"
        ) from None
