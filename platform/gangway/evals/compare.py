"""Each candidate against its suite's baseline, metric by metric: a change past the metric's
tolerance in the wrong direction is a regression."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gangway.evals.suites import EvalSuite, Metric

__all__ = ["Row", "Verdict", "compare", "judge"]

Verdict = Literal["regression", "improved", "ok", "no baseline", "not scored"]

Scores = Mapping[tuple[str, str], Mapping[str, float]]
"""(suite name, candidate ``NAME/VERSION``) → its metrics."""


@dataclass(frozen=True)
class Row:
    suite: str
    candidate: str
    metric: str
    value: float | None
    baseline: float | None
    delta: float | None
    """Relative change from the baseline (0.05: 5 % more)."""
    verdict: Verdict


def judge(metric: Metric, value: float, base: float) -> tuple[float, Verdict]:
    """The relative change of ``value`` from ``base`` and what it means for ``metric``."""
    delta = (value - base) / abs(base) if base else (0.0 if value == base else float("inf"))
    worse = delta if metric.better == "lower" else -delta
    if worse > metric.tolerance:
        return delta, "regression"
    if -worse > metric.tolerance:
        return delta, "improved"
    return delta, "ok"


def compare(
    suites: Sequence[EvalSuite],
    candidates: Mapping[str, Sequence[str]],
    baselines: Mapping[str, str | None],
    scores: Scores,
) -> list[Row]:
    """A row per (suite, candidate, metric) for the ``candidates`` of each suite (by name),
    against ``baselines[suite]`` (a ``NAME/VERSION``, or None when none is set)."""
    rows: list[Row] = []
    for suite in suites:
        base_ref = baselines.get(suite.name)
        base = scores.get((suite.name, base_ref)) if base_ref else None
        for ref in candidates.get(suite.name, ()):
            got = scores.get((suite.name, ref))
            for metric in suite.metrics:
                value = got.get(metric.name) if got else None
                b = base.get(metric.name) if base else None
                if value is None:
                    rows.append(Row(suite.name, ref, metric.name, None, b, None, "not scored"))
                elif b is None or ref == base_ref:
                    verdict: Verdict = "ok" if ref == base_ref else "no baseline"
                    rows.append(Row(suite.name, ref, metric.name, value, b, None, verdict))
                else:
                    delta, verdict = judge(metric, value, b)
                    rows.append(Row(suite.name, ref, metric.name, value, b, delta, verdict))
    return rows
