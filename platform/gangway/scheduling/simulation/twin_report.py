"""What ``gangway simulate --fleet … --workload …`` writes and prints: per replay (the twin, its
baselines and each what-if) and per queue, the queue wait p50/p95/p99, the GPUs held over time
and as a share of the fleet, preemptions and the GPU-hours lost to them, the gangs that never fit
and those not started by the horizon; the difference of every replay from the twin.

A gang's queue wait is arrival → first start; one not started by the horizon counts with what
it had waited by then (a lower bound — leaving it out would flatter the replay that starves
it). GPU allocation is the time-weighted mean after the first :data:`WARMUP` of the horizon
(the empty fleet takes days to fill with week-long jobs).

Files, each written beside itself and renamed into place: ``twin_summary.md`` (the tables),
``twin_queues.csv`` (one row per replay and queue), ``twin_gangs.csv`` (one row per replay and
gang), ``twin_allocation.csv`` (GPUs each queue holds, per replay and hour) and
``twin_allocation.png`` (the fleet's GPU allocation over time, one line per replay; the GPUs each
queue holds in the twin).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gangway.scheduling.simulation.twin import GangOutcome, TwinRun
from gangway.storage import write_atomic

__all__ = ["WARMUP", "QueueRow", "hourly_held", "queue_rows", "write_twin_outputs"]

WARMUP = 0.1
"""The share of the horizon left out of the allocation mean."""
ALL = "(all)"

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class QueueRow:
    run: str
    queue: str
    gangs: int
    wait_h: tuple[float, float, float]
    """p50, p95, p99 of the queue wait, hours."""
    gpus_held: float
    """Mean GPUs held after the warm-up."""
    share: float
    """… as % of the fleet's GPUs (the fleet's allocation % for ``(all)``)."""
    preemptions: int
    lost_gpu_hours: float
    never_fit: int
    not_started: int


def hourly_held(run: TwinRun) -> Floats:
    """(hours, queues): GPUs each queue held in each hour of the horizon, time-weighted."""
    hours = math.ceil(run.settings.horizon_s / 3600)
    if not run.times:
        return np.zeros((hours, len(run.queues)))
    t = np.asarray(run.times, dtype=np.float64)
    held = np.asarray(run.held, dtype=np.float64).reshape(len(t), len(run.queues))
    width = np.diff(np.append(t, float(run.settings.horizon_s)))
    cum = np.vstack([np.zeros(len(run.queues)), np.cumsum(held * width[:, None], axis=0)])
    edges = np.minimum(np.arange(hours + 1) * 3600.0, float(run.settings.horizon_s))
    k = np.searchsorted(t, edges, side="right") - 1
    before = k < 0
    k = np.maximum(k, 0)
    integral = cum[k] + held[k] * (edges - t[k])[:, None]
    integral[before] = 0.0
    spans = np.maximum(np.diff(edges), 1.0)
    out: Floats = np.diff(integral, axis=0) / spans[:, None]
    return out


def _wait_h(run: TwinRun, outcomes: Sequence[GangOutcome]) -> tuple[float, float, float]:
    waits = [
        (
            (o.first_start_s if o.first_start_s is not None else run.settings.horizon_s)
            - o.gang.arrival_s
        )
        / 3600
        for o in outcomes
        if o.never_fits is None
    ]
    if not waits:
        return (0.0, 0.0, 0.0)
    p = np.percentile(np.asarray(waits), [50, 95, 99])
    return (float(p[0]), float(p[1]), float(p[2]))


def queue_rows(run: TwinRun) -> list[QueueRow]:
    """One row per queue that had gangs, then ``(all)``."""
    per_hour = hourly_held(run)
    skip = int(len(per_hour) * WARMUP)
    steady = per_hour[skip:] if len(per_hour) > skip else per_hour
    mean_held = steady.mean(axis=0) if len(steady) else np.zeros(len(run.queues))
    rows = []
    groups: dict[str, list[GangOutcome]] = {}
    for o in run.outcomes:
        groups.setdefault(o.queue or "", []).append(o)
    for q in [*run.queues, ALL]:
        outcomes = run.outcomes if q == ALL else groups.get(q, [])
        if not outcomes:
            continue
        held = float(mean_held.sum() if q == ALL else mean_held[run.queues.index(q)])
        rows.append(
            QueueRow(
                run=run.name,
                queue=q,
                gangs=len(outcomes),
                wait_h=_wait_h(run, outcomes),
                gpus_held=held,
                share=100 * held / run.capacity if run.capacity else 0.0,
                preemptions=sum(o.preemptions for o in outcomes),
                lost_gpu_hours=sum(o.lost_gpu_hours for o in outcomes),
                never_fit=sum(o.never_fits is not None for o in outcomes),
                not_started=sum(o.first_start_s is None and o.never_fits is None for o in outcomes),
            )
        )
    return rows


def _row_cells(r: QueueRow) -> list[str]:
    return [
        f"{r.wait_h[0]:.2f} / {r.wait_h[1]:.1f} / {r.wait_h[2]:.1f}",
        f"{r.gpus_held:.0f} ({r.share:.1f} %)",
        str(r.preemptions),
        f"{r.lost_gpu_hours:,.0f}",
        str(r.never_fit),
        str(r.not_started),
    ]


HEADER = (
    "| wait p50 / p95 / p99 h | GPUs held (% of fleet) | preemptions | GPU-h lost | never fit "
    "| not started |"
)


def queues_md(runs: Sequence[TwinRun]) -> str:
    """Per replay and queue."""
    lines = [f"| replay | queue | gangs {HEADER}", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for r in queue_rows(run):
            lines.append(f"| {r.run} | {r.queue} | {r.gangs} | " + " | ".join(_row_cells(r)) + " |")
    return "\n".join(lines)


def _delta(a: float, b: float, fmt: str) -> str:
    d = b - a
    return f"{b:{fmt}} ({'+' if d >= 0 else '−'}{abs(d):{fmt}})"


def difference_md(runs: Sequence[TwinRun]) -> str:
    """Every replay against the first (the twin): the fleet's numbers and the difference."""
    base = queue_rows(runs[0])[-1]
    lines = [
        "| replay | GPU allocation % | wait p50 h | wait p95 h | wait p99 h | preemptions | "
        "GPU-h lost | never fit | not started |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        r = queue_rows(run)[-1]
        same = run is runs[0]
        cells = [
            f"{r.share:.2f}" if same else _delta(base.share, r.share, ".2f"),
            *(
                f"{r.wait_h[i]:.2f}" if same else _delta(base.wait_h[i], r.wait_h[i], ".2f")
                for i in range(3)
            ),
            str(r.preemptions) if same else _delta(base.preemptions, r.preemptions, ".0f"),
            f"{r.lost_gpu_hours:,.0f}"
            if same
            else _delta(base.lost_gpu_hours, r.lost_gpu_hours, ",.0f"),
            str(r.never_fit),
            str(r.not_started) if same else _delta(base.not_started, r.not_started, ".0f"),
        ]
        lines.append(f"| {run.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_md(runs: Sequence[TwinRun], *, title: str, about: Sequence[str]) -> str:
    speed = "; ".join(
        f"{r.name}: {r.seconds:.1f} s, {r.events:,} events, {r.decisions:,} decisions "
        f"({1000 * r.decision_s / max(r.decisions, 1):.2f} ms each)"
        for r in runs
    )
    return "\n".join(
        [
            f"# {title}",
            "",
            *(f"- {line}" for line in about),
            "",
            "## Side by side (difference from the twin)",
            "",
            difference_md(runs),
            "",
            "## Per queue",
            "",
            queues_md(runs),
            "",
            f"Replay time: {speed}.",
            "",
        ]
    )


def _csv(rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def gangs_csv(runs: Sequence[TwinRun]) -> str:
    head = ["replay", "gang", "team", "queue", "arrival_s", "first_start_s", "end_s", "cluster"]
    rows: list[list[object]] = [[*head, "preemptions", "lost_gpu_hours", "never_fits"]]
    for run in runs:
        for o in run.outcomes:
            g = o.gang
            rows.append(
                [
                    run.name,
                    g.name,
                    g.team,
                    o.queue or "",
                    g.arrival_s,
                    "" if o.first_start_s is None else round(o.first_start_s),
                    "" if o.end_s is None else round(o.end_s),
                    o.cluster or "",
                    o.preemptions,
                    round(o.lost_gpu_hours, 2),
                    o.never_fits or "",
                ]
            )
    return _csv(rows)


def allocation_csv(runs: Sequence[TwinRun]) -> str:
    rows: list[list[object]] = []
    for run in runs:
        if not rows:
            rows.append(["replay", "hour", "allocation_pct", *run.queues])
        for h, held in enumerate(hourly_held(run)):
            pct = 100 * held.sum() / run.capacity if run.capacity else 0.0
            rows.append([run.name, h, round(pct, 2), *(round(float(x), 1) for x in held)])
    return _csv(rows)


def _queues_csv(runs: Sequence[TwinRun]) -> str:
    head: list[object] = ["replay", "queue", "gangs", "wait_p50_h", "wait_p95_h", "wait_p99_h"]
    rows = [[*head, "gpus_held", "share_pct", "preemptions", "lost_gpu_hours", "never_fit"]]
    rows[0].append("not_started")
    for run in runs:
        for r in queue_rows(run):
            waits = (round(w, 3) for w in r.wait_h)
            rows.append([r.run, r.queue, r.gangs, *waits, round(r.gpus_held, 1), round(r.share, 2)])
            rows[-1] += [r.preemptions, round(r.lost_gpu_hours, 1), r.never_fit, r.not_started]
    return _csv(rows)


def plot(runs: Sequence[TwinRun], path: Path, title: str) -> None:
    """The fleet's GPU allocation over time per replay; the GPUs each queue holds in the twin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for run in runs:
        held = hourly_held(run)
        days = np.arange(len(held)) / 24
        top.plot(days, 100 * held.sum(axis=1) / max(run.capacity, 1), label=run.name, lw=1)
    top.set_ylabel("GPU allocation %")
    top.set_ylim(0, 105)
    top.legend(fontsize=8, loc="lower right")
    top.set_title(title)
    twin = hourly_held(runs[0])
    days = np.arange(len(twin)) / 24
    bottom.stackplot(days, twin.T, labels=list(runs[0].queues))
    bottom.set_ylabel(f"GPUs held ({runs[0].name})")
    bottom.set_xlabel("day")
    bottom.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_twin_outputs(
    out: Path, runs: Sequence[TwinRun], *, title: str, about: Sequence[str], with_plot: bool
) -> list[Path]:
    """Write the files of the module docstring into ``out``; the paths written."""
    files = {
        "twin_summary.md": summary_md(runs, title=title, about=about),
        "twin_queues.csv": _queues_csv(runs),
        "twin_gangs.csv": gangs_csv(runs),
        "twin_allocation.csv": allocation_csv(runs),
    }
    written = []
    for name, text in files.items():
        write_atomic(out / name, text.encode())
        written.append(out / name)
    png = out / "twin_allocation.png"
    if with_plot:
        tmp = out / ".twin_allocation.png.tmp.png"
        plot(runs, tmp, title)
        tmp.replace(png)
        written.append(png)
    else:
        png.unlink(missing_ok=True)
    return written
