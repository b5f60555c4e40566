"""What is due tonight: every (candidate, suite) with no finished evaluation at the suite's
current digest — found through lineage (the evaluation runs in MLflow), not by date, so a
missed night, a failed run or a run killed half-way is caught up by the next one."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gangway.evals.suites import EvalSuite

__all__ = ["Candidate", "Pair", "ScoredKey", "is_baseline", "pending"]

ScoredKey = tuple[str, str, str]
"""(suite name, suite digest, candidate ``NAME/VERSION``) of a finished evaluation."""


@dataclass(frozen=True)
class Candidate:
    """A model version that can be scored: its checkpoint and the aliases it holds."""

    model: str
    version: int
    checkpoint: str
    aliases: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.model}/{self.version}"


@dataclass(frozen=True)
class Pair:
    """One evaluation to run: a candidate on a suite (an item of the fan-out)."""

    candidate: str
    checkpoint: str
    suite: str


def is_baseline(c: Candidate, suite: EvalSuite) -> bool:
    """Whether ``c`` is the version ``suite`` compares with."""
    b = suite.baseline
    return c.version == b.version or (b.alias is not None and b.alias in c.aliases)


def pending(
    candidates: Sequence[Candidate],
    suites: Sequence[EvalSuite],
    scored: Collection[ScoredKey],
    *,
    limit: int = 0,
) -> list[Pair]:
    """The pairs not scored yet, per suite: its baseline first (a comparison needs it), then
    the newest versions first; at most ``limit`` a suite (0: all — what is left waits for the
    next night). A candidate without a checkpoint cannot be scored and is left out."""
    out: list[Pair] = []
    for suite in suites:
        due = [
            c
            for c in sorted(candidates, key=lambda c: (not is_baseline(c, suite), -c.version))
            if c.checkpoint and (suite.name, suite.digest, c.ref) not in scored
        ]
        out += [Pair(c.ref, c.checkpoint, suite.name) for c in due[: limit or None]]
    return out
