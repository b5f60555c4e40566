"""Retry rules per step kind, implementing the exit-code contract of ``shared/DESIGN.md``.

Retry only what may succeed next time:

* the pod was deleted, evicted, or its node shut down — Argo reports the node as ``Error``;
* the step said so itself — exit code 75 (``EX_TEMPFAIL``);
* it was killed — 137 (SIGKILL, e.g. OOM or a lost node) or 143 (SIGTERM, preemption).

Never a permanent error (exit 1 or anything else). Backoff is bounded, and a retry avoids the
node that just failed (``affinity.nodeAntiAffinity``). The local executor reads these same
fields from the compiled manifest, so the rules are tested where they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hera.workflows import RetryStrategy
from hera.workflows.models import Backoff, RetryAffinity, RetryNodeAntiAffinity

__all__ = ["RETRYABLE_EXIT_CODES", "StepKind", "retry_expression", "retry_strategy"]

RETRYABLE_EXIT_CODES = (75, 137, 143)
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
