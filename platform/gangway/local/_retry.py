"""A template's ``retryStrategy`` as a local run reads it: its limit, and the variables Argo
gives each attempt of a retried template (``retries``, ``lastRetry.*``).

Argo retries a template whose ``retryStrategy`` has no ``limit`` (``retryStrategy: {}``
included) without end — under its policy, ``OnFailure`` unless an ``expression`` is given
(then ``Always``) — until an attempt succeeds, the backoff's ``maxDuration`` or a deadline
stops it. A local run must end, so it retries such a template at most
:data:`UNBOUNDED_RETRIES` times, and says so: when the node starts and, if the cap is what
stopped it, in its message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.argo.nodes import last_retry_scope
from gangway.argo.retries import LastAttempt
from gangway.argo.substitution import substitute
from gangway.errors import PermanentError

__all__ = ["UNBOUNDED_RETRIES", "Limit", "attempt_scope", "retry_limit", "without_limit"]

UNBOUNDED_RETRIES = 10
"""How many times a local run retries a template whose ``retryStrategy`` has no ``limit``
(Argo: without end). Ten retries outlast any flake a cluster would ride out with a bounded
backoff, and still end a step that fails every time within one sitting."""


@dataclass(frozen=True)
class Limit:
    """The ``retryStrategy`` to decide retries by (its ``limit`` a number) and whether that
    number is the local cap rather than the template's own."""

    strategy: dict[str, Any]
    capped: bool

    @property
    def notice(self) -> str:
        """What the node says when it starts."""
        if not self.capped:
            return ""
        return (
            f"retryStrategy has no limit: Argo retries it until it succeeds; a local run "
            f"retries it at most {UNBOUNDED_RETRIES} times"
        )

    def stopped(self, retries_done: int) -> str:
        """What the node adds when the local cap, not Argo, ended its retries."""
        if not self.capped or retries_done < UNBOUNDED_RETRIES:
            return ""
        return (
            f"no more retries: the local cap of {UNBOUNDED_RETRIES} retries was reached "
            "(its retryStrategy has no limit: Argo would retry it again)"
        )


def without_limit(template: Mapping[str, Any]) -> bool:
    """Whether ``template`` has a ``retryStrategy`` without ``limit`` (Argo: no end)."""
    strategy = template.get("retryStrategy")
    return strategy is not None and (strategy or {}).get("limit") in (None, "")


def retry_limit(template: Mapping[str, Any], scope: Mapping[str, str], where: str) -> Limit:
    """``template``'s ``retryStrategy`` with its ``limit`` filled and read as a number: none
    is 0 retries, no ``limit`` is the local cap."""
    if template.get("retryStrategy") is None:
        return Limit({"limit": 0}, capped=False)
    strategy = dict(template["retryStrategy"] or {})
    if without_limit(template):
        strategy["limit"] = UNBOUNDED_RETRIES
        return Limit(strategy, capped=True)
    raw = substitute(str(strategy["limit"]), scope, where=f"{where}.retryStrategy.limit")
    if not raw.strip().isdigit():
        raise PermanentError(
            f"{where}.retryStrategy.limit: {raw!r} is not a whole number of retries; give one "
            "(0 or more)"
        )
    strategy["limit"] = int(raw)
    return Limit(strategy, capped=False)


def attempt_scope(
    template: Mapping[str, Any], retries_done: int, last: LastAttempt | None
) -> dict[str, str]:
    """``retries`` (the attempt's number, from 0) and ``lastRetry.*`` (of the attempt before,
    Argo's empty values on the first) for an attempt of a template with a ``retryStrategy``;
    nothing for one without."""
    if template.get("retryStrategy") is None:
        return {}
    before = last or LastAttempt("", 0, "")
    scope = last_retry_scope(
        before.status, before.exit_code, before.seconds, before.message, no_exit_code="0"
    )
    return {"retries": str(retries_done), **scope}
