"""What ``gangway simulate --gangs`` writes and prints: per policy over its seeds, the GPU
allocation over time, the share of multi-pod gangs placed in the tightest domain that could
hold them, the gangs that waited although enough GPUs were free in total, and the queue wait.

Files, each written beside itself and renamed into place: ``gang_summary.md`` (the table),
``gang_results.csv`` (one row per policy, seed and gang), ``gang_allocation.csv`` (GPU
allocation % per policy, seed and hour) and ``gang_allocation.png`` (the allocation over time,
mean over seeds, one line per policy).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gangway.scheduling.simulation.gangs import GangRun
from gangway.storage import write_atomic

__all__ = ["GangHeadline", "gang_headlines", "hourly_allocation", "write_gang_outputs"]

WARMUP = 0.3
"""The first 30 % of the horizon fills the empty fleet (the long jobs take days to) and is left
out of the allocation."""


@dataclass(frozen=True)
class GangHeadline:
    policy: str
    seeds: int
    allocation: float
    """Mean GPU allocation % after the warm-up, mean over seeds."""
    tightest: float
    """% of the started multi-pod gangs placed in the tightest domain that could hold them."""
    waited_with_room: float
    """% of gangs that waited at a moment when enough GPUs of their model were free."""
    across_domains: float
    """% of gangs that waited when their pods fitted on free nodes, just not in one domain."""
    wait_one: tuple[float, float, float]
    """Queue wait of one-pod gangs, hours: mean, median, p90 (those not started: until the
    horizon)."""
    wait_multi: tuple[float, float, float]
    """The same for multi-pod gangs."""
    not_started: float
    """Gangs still waiting at the horizon (mean over seeds)."""
    ms_per_decision: float


def hourly_allocation(run: GangRun) -> list[float]:
    """GPU allocation % in each hour of the horizon (time-weighted within the hour)."""
    hours = math.ceil(run.horizon_s / 3600)
    edges = np.append(np.asarray(run.times, dtype=np.float64), float(run.horizon_s))
    alloc = np.asarray(run.allocated, dtype=np.float64)
    out = []
    for h in range(hours):
        lo, hi = h * 3600.0, min((h + 1) * 3600.0, float(run.horizon_s))
        overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
        covered = overlap.sum()
        out.append(
            float((overlap * alloc).sum() / run.capacity / (hi - lo) * 100) if covered else 0.0
        )
    return out


def _waits(runs: Sequence[GangRun], multi: bool) -> tuple[float, float, float]:
    """Mean, median and p90 queue wait in hours of the one-pod (or multi-pod) gangs; a gang
    still waiting at the horizon counts with what it had waited by then (a lower bound —
    leaving it out would flatter the policy that starves it)."""
    waits = sorted(
        ((r.start_s if r.start_s is not None else run.horizon_s) - r.job.arrival_s) / 3600
        for run in runs
        for r in run.records
        if (r.job.pods > 1) == multi
    )
    if not waits:
        return (math.nan,) * 3
    return statistics.mean(waits), statistics.median(waits), waits[int(0.9 * (len(waits) - 1))]


def gang_headlines(runs: Sequence[GangRun]) -> list[GangHeadline]:
    out = []
    for policy in dict.fromkeys(r.policy for r in runs):
        mine = [r for r in runs if r.policy == policy]
        allocs = []
        for run in mine:
            hourly = hourly_allocation(run)
            allocs.append(statistics.mean(hourly[math.floor(len(hourly) * WARMUP) :] or [0.0]))
        records = [rec for run in mine for rec in run.records]
        multi = [r for r in records if r.start_s is not None and r.job.pods > 1]
        n = max(len(records), 1)
        decisions = sum(r.decisions for r in mine)
        out.append(
            GangHeadline(
                policy=policy,
                seeds=len(mine),
                allocation=statistics.mean(allocs),
                tightest=100 * sum(r.tier == r.tightest for r in multi) / max(len(multi), 1),
                waited_with_room=100 * sum(r.waited_with_room for r in records) / n,
                across_domains=100 * sum(r.across_domains for r in records) / n,
                wait_one=_waits(mine, multi=False),
                wait_multi=_waits(mine, multi=True),
                not_started=sum(r.start_s is None for r in records) / len(mine),
                ms_per_decision=1000 * sum(r.seconds for r in mine) / max(decisions, 1),
            )
        )
    return out


def _h(v: float) -> str:
    return "—" if math.isnan(v) else f"{v:.2f}"


def summary_md(runs: Sequence[GangRun], *, title: str, about: Sequence[str]) -> str:
    lines = [f"# {title}", "", *(f"- {a}" for a in about), ""]
    lines += [
        "| policy | GPU allocation % | in tightest domain % | waited with GPUs free % "
        "| … across domains % | wait 1 pod, h (mean / p50 / p90) | wait multi-pod, h "
        "(mean / p50 / p90) | not started | ms / decision |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for h in gang_headlines(runs):
        one = " / ".join(_h(v) for v in h.wait_one)
        multi = " / ".join(_h(v) for v in h.wait_multi)
        lines.append(
            f"| {h.policy} | {h.allocation:.2f} | {h.tightest:.1f} | {h.waited_with_room:.1f} "
            f"| {h.across_domains:.1f} | {one} | {multi} | {h.not_started:.1f} "
            f"| {h.ms_per_decision:.2f} |"
        )
    lines += [
        "",
        f"GPU allocation: mean over the hours after the first {WARMUP:.0%} of the horizon, "
        "mean over seeds. Waits: a gang not started by the horizon counts with what it had "
        "waited by then. In tightest domain: of the multi-pod gangs that started, those whose "
        "pods share the closest tier where some domain could hold them then. Waited with GPUs "
        "free: gangs that were refused at a moment when the fleet had enough GPUs of their "
        "model free in total; across domains: … and their pods fitted on free nodes, only not "
        "in one domain at their tier.",
    ]
    return "\n".join(lines) + "\n"


def _csv(rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def results_csv(runs: Sequence[GangRun]) -> str:
    rows: list[Sequence[object]] = [
        (
            "policy",
            "seed",
            "name",
            "pods",
            "gpus_per_pod",
            "arrival_s",
            "start_s",
            "tier",
            "tightest_tier",
            "waited_with_room",
            "across_domains",
        )
    ]
    for run in runs:
        for r in run.records:
            j = r.job
            rows.append(
                (
                    run.policy,
                    run.seed,
                    j.name,
                    j.pods,
                    j.gpus_per_pod,
                    j.arrival_s,
                    "" if r.start_s is None else round(r.start_s),
                    "" if r.tier is None else r.tier + 1,
                    "" if r.tightest is None else r.tightest + 1,
                    int(r.waited_with_room),
                    int(r.across_domains),
                )
            )
    return _csv(rows)


def allocation_csv(runs: Sequence[GangRun]) -> str:
    rows: list[Sequence[object]] = [("policy", "seed", "hour", "gpu_alloc_pct")]
    for run in runs:
        rows += [
            (run.policy, run.seed, h, f"{v:.2f}") for h, v in enumerate(hourly_allocation(run))
        ]
    return _csv(rows)


def plot(runs: Sequence[GangRun], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for policy in dict.fromkeys(r.policy for r in runs):
        curves = np.array([hourly_allocation(r) for r in runs if r.policy == policy])
        hours = np.arange(curves.shape[1])
        ax.plot(hours / 24, curves.mean(axis=0), label=policy, linewidth=1.2)
    ax.set_xlabel("day")
    ax.set_ylabel("GPU allocation %")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def write_gang_outputs(
    out: Path,
    runs: Sequence[GangRun],
    *,
    title: str,
    about: Sequence[str],
    with_plot: bool,
) -> list[Path]:
    """Write the files (see the module docstring) into ``out``; the paths written."""
    written = []
    for name, text in (
        ("gang_summary.md", summary_md(runs, title=title, about=about)),
        ("gang_results.csv", results_csv(runs)),
        ("gang_allocation.csv", allocation_csv(runs)),
    ):
        write_atomic(out / name, text.encode())
        written.append(out / name)
    png = out / "gang_allocation.png"
    if with_plot:
        plot(runs, png, title)
        written.append(png)
    else:
        png.unlink(missing_ok=True)
    return written
