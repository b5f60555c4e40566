"""What ``gangway simulate`` writes: ``allocation.csv`` (one row per policy, seed and arrived
%), ``summary.md`` (means and spread at 100 % and 130 %, failed pods, fragmented GPU
capacity, time per pod) and ``allocation.png`` (allocation against arrived demand, one line
per policy). Each file is written beside itself and renamed into place."""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gangway.scheduling.simulation.run import MARKS, Run
from gangway.storage import write_atomic

__all__ = [
    "Headline",
    "allocation_csv",
    "headlines",
    "pct",
    "plot",
    "summary_md",
    "write_outputs",
]


@dataclass(frozen=True)
class Headline:
    """One policy over its seeds."""

    policy: str
    seeds: int
    at: dict[int, tuple[float, float, float, float]]
    """Arrived % → (mean, standard deviation, lowest, highest) GPU allocation %."""
    failed: float
    failed_gpu_pods: float
    fragmented: dict[int, float]
    """Arrived % → mean fragmented GPU capacity, % of capacity."""
    micros_per_pod: float


def _spread(values: list[float]) -> tuple[float, float, float, float]:
    """Mean, sd, min and max over the seeds; all NaN unless every seed got there (a mean of
    the seeds that did would flatter)."""
    if not values or any(math.isnan(v) for v in values):
        return (math.nan,) * 4
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.mean(values), sd, min(values), max(values)


def headlines(runs: Sequence[Run]) -> list[Headline]:
    """Per policy, in the order the runs came."""
    order = list(dict.fromkeys(r.policy for r in runs))
    out = []
    for policy in order:
        rs = [r for r in runs if r.policy == policy]
        out.append(
            Headline(
                policy=policy,
                seeds=len(rs),
                at={k: _spread([r.curve[k] for r in rs]) for k in MARKS},
                failed=statistics.mean(r.failed for r in rs),
                failed_gpu_pods=statistics.mean(r.failed_gpu_pods for r in rs),
                fragmented={k: statistics.mean(r.fragmented[k] for r in rs) for k in MARKS},
                micros_per_pod=1e6 * sum(r.seconds for r in rs) / sum(r.pods for r in rs),
            )
        )
    return out


def allocation_csv(runs: Sequence[Run]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["policy", "seed", "arrived_pct", "gpu_alloc_pct"])
    for r in runs:
        for k, v in enumerate(r.curve):
            w.writerow([r.policy, r.seed, k, "" if math.isnan(v) else f"{v:.4f}"])
    return buf.getvalue()


def pct(v: float) -> str:
    """A percentage with two decimals; a dash where arrivals never got there."""
    return "—" if math.isnan(v) else f"{v:.2f}"


def summary_md(runs: Sequence[Run], *, title: str, about: Sequence[str]) -> str:
    """The summary page: what was run, then one table row per policy."""
    lines = [f"# {title}", "", *(f"- {a}" for a in about), ""]
    head = "| policy | seeds |"
    rule = "|---|---|"
    for k in MARKS:
        head += f" GPU alloc % at {k} % (mean ± sd, min–max) |"
        rule += "---|"
    head += " failed pods (GPU) | fragmented GPU % at " + " / ".join(f"{k} %" for k in MARKS)
    head += " | µs per pod |"
    rule += "---|---|---|"
    lines += [head, rule]
    for h in headlines(runs):
        row = f"| {h.policy} | {h.seeds} |"
        for k in MARKS:
            mean, sd, lo, hi = h.at[k]
            row += f" {pct(mean)} ± {pct(sd)} ({pct(lo)}–{pct(hi)}) |"
        frag = " / ".join(pct(h.fragmented[k]) for k in MARKS)
        row += f" {h.failed:.0f} ({h.failed_gpu_pods:.0f}) | {frag} | {h.micros_per_pod:.0f} |"
        lines.append(row)
    lines += [
        "",
        "GPU allocation: GPU milli allocated ÷ the cluster's GPU capacity, read when the GPU "
        "milli requested so far (failed pods too) reaches the given % of capacity. Fragmented "
        "GPU capacity: idle GPU milli the workload's pods can no longer use (GPUs short of CPU "
        "or memory, slivers no pod shape fits), as `gangway.scheduling.packing` values the "
        "room left.",
        "",
    ]
    return "\n".join(lines)


def plot(runs: Sequence[Run], title: str) -> bytes:
    """allocation.png: mean allocation against arrived demand per policy (min–max shaded),
    the whole range on the left and, on the right, from 80 % arrived on, where they part."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (whole, near) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    xs = list(range(len(runs[0].curve)))
    lowest = 100.0
    for ax in (whole, near):
        ax.plot([0, 100, xs[-1]], [0, 100, 100], color="0.8", lw=1, ls="--", label="limit")
    for policy in dict.fromkeys(r.policy for r in runs):
        rs = [r.curve for r in runs if r.policy == policy]
        spreads = [_spread([c[k] for c in rs]) for k in xs]
        mean, lo, hi = ([s[i] for s in spreads] for i in (0, 2, 3))
        for ax in (whole, near):
            (line,) = ax.plot(xs, mean, lw=1.6, label=policy)
            ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
        lowest = min([lowest, *(v for v in lo[80:] if not math.isnan(v))])
    whole.set_xlim(0, xs[-1])
    whole.set_ylim(0, 102)
    near.set_xlim(80, xs[-1])
    near.set_ylim(max(0.0, lowest - 1), 100.5)
    near.set_title("from 80 % arrived", fontsize=9)
    for ax in (whole, near):
        ax.set_xlabel("arrived GPU demand (% of capacity)")
        ax.grid(alpha=0.3)
    whole.set_ylabel("GPU allocation (% of capacity)")
    whole.set_title(title, fontsize=10)
    near.legend(loc="lower right")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def write_outputs(
    out: Path, runs: Sequence[Run], *, title: str, about: Sequence[str], with_plot: bool
) -> list[Path]:
    """Write the files into ``out``; the paths written. Without the plot, an allocation.png
    left there by an earlier run is removed: it would contradict the new CSV."""
    files = {
        "allocation.csv": allocation_csv(runs).encode(),
        "summary.md": summary_md(runs, title=title, about=about).encode(),
    }
    if with_plot:
        files["allocation.png"] = plot(runs, title)
    else:
        (out / "allocation.png").unlink(missing_ok=True)
    written = []
    for name, data in files.items():
        write_atomic(out / name, data)
        written.append(out / name)
    return written
