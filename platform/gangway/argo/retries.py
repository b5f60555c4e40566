"""Retry rules per step kind, implementing the exit-code contract (:mod:`gangway.contract`).

Retry only what may succeed next time:

* the pod was deleted, evicted, or its node shut down — Argo reports the node as ``Error``;
* the step said so itself — exit code 75 (``EX_TEMPFAIL``);
* it was killed — 137 (SIGKILL, e.g. OOM or a lost node) or 143 (SIGTERM, preemption).

Never a permanent error (exit 1 or anything else). Backoff is bounded, and a retry avoids the
node that just failed (``affinity.nodeAntiAffinity``).

Writing the rules (:func:`retry_strategy`) and reading them (:func:`next_retry`: whether a
failed attempt is retried and after how long, as Argo decides it) live together: the local
executor reads these same fields from the compiled manifest, so the rules are tested where
they run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hera.workflows import RetryStrategy
from hera.workflows.models import Backoff, RetryAffinity, RetryNodeAntiAffinity

from gangway.argo.expressions import evaluate
from gangway.argo.nodes import last_retry_scope
from gangway.contract import EXIT_KILLED, EXIT_PREEMPTED, EXIT_TRANSIENT
from gangway.errors import UnsupportedConstruct

__all__ = [
    "RETRYABLE_EXIT_CODES",
    "RETRY_POLICIES",
    "LastAttempt",
    "StepKind",
    "duration_seconds",
    "next_retry",
    "retry_expression",
    "retry_strategy",
]

RETRYABLE_EXIT_CODES = (EXIT_TRANSIENT, EXIT_KILLED, EXIT_PREEMPTED)
StepKind = Literal["io", "compute", "gang"]


@dataclass(frozen=True)
class _Rule:
    limit: int
    backoff_seconds: int
    max_backoff: str


# io: cheap and idempotent, retry more; compute: a model on a GPU; gang: the Argo-level retry
# of a Volcano Job, which already restarts its pods itself (maxRetry) before failing.
_RULES: dict[StepKind, _Rule] = {
    "io": _Rule(limit=4, backoff_seconds=5, max_backoff="2m"),
    "compute": _Rule(limit=3, backoff_seconds=15, max_backoff="5m"),
    "gang": _Rule(limit=2, backoff_seconds=30, max_backoff="10m"),
}


def retry_expression() -> str:
    """The Argo ``expr`` condition: retry on node errors and the retryable exit codes."""
    codes = ", ".join(str(c) for c in RETRYABLE_EXIT_CODES)
    return f"lastRetry.status == 'Error' || asInt(lastRetry.exitCode) in [{codes}]"


def retry_strategy(kind: StepKind) -> RetryStrategy:
    """The Argo retryStrategy for a step of ``kind`` (pure; see the module docstring)."""
    rule = _RULES[kind]
    return RetryStrategy(
        limit=rule.limit,
        # A gang's pods are restarted by Volcano; Argo retries only errors creating the Job.
        retry_policy="OnError" if kind == "gang" else "Always",
        expression=None if kind == "gang" else retry_expression(),
        backoff=Backoff(
            duration=f"{rule.backoff_seconds}s", factor=2, max_duration=rule.max_backoff
        ),
        affinity=RetryAffinity(node_anti_affinity=RetryNodeAntiAffinity()),
    )


# ---- reading a retryStrategy: Argo's decision, as pure functions ----------------------------

RETRY_POLICIES: dict[str, frozenset[str]] = {
    "Always": frozenset({"Failed", "Error"}),
    "OnFailure": frozenset({"Failed"}),
    "OnError": frozenset({"Error"}),
    "OnTransientError": frozenset({"Error"}),
}
"""Each ``retryPolicy`` → the node phases it retries (a pod-level error is ``Error``)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class LastAttempt:
    """How an attempt ended, as ``retryStrategy.expression`` sees it (``lastRetry.*``)."""

    status: str
    """Failed (the step's own non-zero exit) or Error (killed, or the platform failed)."""
    exit_code: int | None
    message: str
    seconds: float = 0.0
    """How long the attempt ran (``lastRetry.duration``)."""


def duration_seconds(text: str | int | None) -> float:
    """An Argo backoff duration in seconds: a Go duration (``30s``, ``1m30s``, ``1.5h``,
    ``500ms``) or a bare number of seconds."""
    if text is None:
        return 0.0
    raw = str(text).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return float(raw)
    if not raw or _DURATION.sub("", raw):
        raise UnsupportedConstruct(
            f"retry backoff duration {text!r}: expected a number of seconds or a duration "
            "like 30s, 2m, 1m30s, 500ms"
        )
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(raw))


def _may_retry(strategy: Mapping[str, Any], last: LastAttempt) -> bool:
    expr = strategy.get("expression")
    # Argo's default: with an expression, Always (the expression decides), else OnFailure
    policy = str(strategy.get("retryPolicy") or ("Always" if expr else "OnFailure"))
    if policy not in RETRY_POLICIES:
        raise UnsupportedConstruct(f"retryPolicy {policy!r} is not supported locally")
    if last.status not in RETRY_POLICIES[policy]:
        return False
    if expr:
        scope = last_retry_scope(
            last.status, last.exit_code, last.seconds, last.message, no_exit_code="-1"
        )
        return bool(evaluate(str(expr), scope))
    return True


def next_retry(
    strategy: Mapping[str, Any], last: LastAttempt, *, retries_done: int, elapsed: float
) -> float | None:
    """Seconds to wait before retrying a node whose latest attempt ended as ``last``, or None
    when it is not retried: the limit is reached, the policy or expression says no, or the
    backoff's ``maxDuration`` (since the first attempt started) would be passed.

    ``strategy`` is the template's ``retryStrategy`` with ``limit`` already substituted;
    ``retries_done`` counts the retries before this decision; the delay is ``duration ×
    factor^retries_done``."""
    if retries_done >= int(strategy.get("limit", 0)) or not _may_retry(strategy, last):
        return None
    backoff = strategy.get("backoff") or {}
    delay = duration_seconds(backoff.get("duration")) * float(backoff.get("factor", 1)) ** (
        retries_done
    )
    if backoff.get("maxDuration") and elapsed + delay > duration_seconds(backoff["maxDuration"]):
        return None
    return delay
