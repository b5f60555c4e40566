"""The night's summary as Markdown: a table per suite (candidate, metric, baseline, delta,
verdict), and the regressions named."""

from __future__ import annotations

from collections.abc import Sequence

from gangway.evals.compare import Row

__all__ = ["markdown", "regressions"]


def regressions(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Candidate ``NAME/VERSION`` → the suites it regressed on (sorted)."""
    out: dict[str, set[str]] = {}
    for r in rows:
        if r.verdict == "regression":
            out.setdefault(r.candidate, set()).add(r.suite)
    return {c: sorted(s) for c, s in sorted(out.items())}


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def _delta(v: float | None) -> str:
    return "—" if v is None else f"{v:+.1%}"


def markdown(title: str, rows: Sequence[Row], suites: Sequence[str], due: int) -> str:
    """The summary: ``due`` evaluations were run tonight over ``suites``."""
    lines = [f"# {title}", ""]
    if not due:
        lines.append(f"Nothing new to score on {len(suites)} suite(s): {', '.join(suites)}.")
        return "\n".join(lines) + "\n"
    bad = regressions(rows)
    if bad:
        for cand, on in bad.items():
            lines.append(f"**REGRESSION: {cand}** on {', '.join(on)}")
    else:
        lines.append(f"No regressions: {due} evaluation(s) on {len(suites)} suite(s).")
    for suite in suites:
        mine = [r for r in rows if r.suite == suite]
        if not mine:
            continue
        lines += [
            "",
            f"## {suite}",
            "",
            "| candidate | metric | value | baseline | delta | verdict |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for r in mine:
            verdict = f"**{r.verdict}**" if r.verdict == "regression" else r.verdict
            lines.append(
                f"| {r.candidate} | {r.metric} | {_num(r.value)} | {_num(r.baseline)} | "
                f"{_delta(r.delta)} | {verdict} |"
            )
    return "\n".join(lines) + "\n"
