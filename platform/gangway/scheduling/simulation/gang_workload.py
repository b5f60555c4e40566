"""A workload of gangs for ``gangway simulate --gangs``: all-or-nothing jobs of N pods × G GPUs
arriving over time, each running for its duration once started, some held to one topology
domain — read from a CSV file, or generated from a published job-size mix.

The file's columns: ``name, arrival_s, pods, gpus_per_pod, duration_s`` and, optionally,
``within`` (the tier the whole gang must stay in, e.g. ``block``; empty: anywhere),
``gpu_model`` (empty: the fleet's first) and ``team`` (empty: the fleet's first). Every
mistake is one line naming the file, the line and the column.

The generator (:func:`generate`) draws, for a fleet of C GPUs at offered load ρ over H hours,
arrivals as a Poisson process of rate ρ·C / E[GPUs × duration], and for each job:

* **its size** from :data:`SIZE_MIX`. Up to one node it is the "Philly distribution" of the
  Gavel scheduler's workload generator (Narayanan et al., OSDI'20, after Jeon et al., ATC'19):
  1 GPU 70 %, 2 GPUs 10 %, 4 GPUs 15 %, 8 GPUs 5 % — a mean of 1.9 GPUs a job, as Philly's
  trace has (1.928; median 1, at most 128). Above it, a multi-node tail of 16, 32, 64 and
  128 GPUs halving in share at each doubling (8 : 4 : 2 : 1), its weight
  (:data:`MULTI_NODE_SHARE`, 5.63 % of jobs) set so the mix's mean is SenseTime Helios's
  3.716 GPUs a job (Hu et al., SC'21; the artifact's cluster summary: 1,580,464 GPU jobs,
  median 1 GPU, at most 2,048). G = the size up to a node's 8, else N = size ÷ 8 pods of 8;
* **its duration** from Gavel's model too: 10^U(1.5, 3) minutes (32 min – 17 h) or, for the
  long ones, 10^U(3, 4) minutes (17 h – 7 days), one job in five long — four in five for a
  multi-node job, since larger jobs run longer: with it, E[GPUs × duration] / (E[GPUs] ×
  E[duration]) is 1.89, between Philly's 1.76 and Helios's 2.00 (from the Acme artifact's
  summary of both traces, Hu et al., NSDI'24);
* **its topology**: a gang of several pods must stay within the widest tier below the whole
  cluster that can hold it (a block, as a hard ``networkTopology``), or anywhere when none
  can; the placement may still choose a closer domain (a rack), which is what the benchmark
  measures.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gangway.errors import PermanentError, closest
from gangway.scheduling.simulation.fleet import NODE_GPUS, Fleet
from gangway.scheduling.simulation.trace import read_csv, unique_name, whole_number

__all__ = [
    "COLUMNS",
    "SIZE_MIX",
    "GangJob",
    "SizeClass",
    "check_jobs",
    "draw_minutes",
    "gang_shape",
    "gangs_csv",
    "generate",
    "mean_minutes",
    "read_gangs",
]

COLUMNS = ("name", "arrival_s", "pods", "gpus_per_pod", "duration_s", "within", "gpu_model", "team")
MAX_DURATION_S = 30 * 86400


@dataclass(frozen=True)
class GangJob:
    name: str
    arrival_s: int
    pods: int
    gpus_per_pod: int
    duration_s: int
    within: str | None = None
    gpu_model: str | None = None
    team: str | None = None
    line: int = field(default=0, compare=False)

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True)
class SizeClass:
    gpus: int
    share: float
    """Of jobs."""


MULTI_NODE_SHARE = 0.0563
"""Of jobs larger than one node: what brings the mix's mean to Helios's 3.716 GPUs a job."""
SIZE_MIX: tuple[SizeClass, ...] = (
    SizeClass(1, 0.70 * (1 - MULTI_NODE_SHARE)),
    SizeClass(2, 0.10 * (1 - MULTI_NODE_SHARE)),
    SizeClass(4, 0.15 * (1 - MULTI_NODE_SHARE)),
    SizeClass(8, 0.05 * (1 - MULTI_NODE_SHARE)),
    SizeClass(16, MULTI_NODE_SHARE * 8 / 15),
    SizeClass(32, MULTI_NODE_SHARE * 4 / 15),
    SizeClass(64, MULTI_NODE_SHARE * 2 / 15),
    SizeClass(128, MULTI_NODE_SHARE * 1 / 15),
)
"""Job sizes (GPUs) and their share of jobs — see the module docstring for the sources."""
SHORT_MINUTES = (1.5, 3.0)
LONG_MINUTES = (3.0, 4.0)
"""A duration is 10^U(lo, hi) minutes from one of the two ranges (Gavel's Philly model)."""
LONG_SHARE = {False: 0.2, True: 0.8}
"""Chance of the long range for a job of one node / of several."""


def draw_minutes(rng: random.Random, multi_node: bool) -> float:
    """A duration in minutes from Gavel's model (see the module docstring)."""
    lo, hi = LONG_MINUTES if rng.random() < LONG_SHARE[multi_node] else SHORT_MINUTES
    return float(10 ** rng.uniform(lo, hi))


def mean_minutes(multi_node: bool) -> float:
    """E[duration] in minutes of a job of one node / of several: the mixture's mean."""

    def mean(lo: float, hi: float) -> float:
        return (10**hi - 10**lo) / ((hi - lo) * math.log(10))

    p = LONG_SHARE[multi_node]
    return p * mean(*LONG_MINUTES) + (1 - p) * mean(*SHORT_MINUTES)


def gang_shape(gpus: int) -> tuple[int, int]:
    """GPUs → (pods, GPUs a pod): one pod up to a node, else whole nodes."""
    return (1, gpus) if gpus <= NODE_GPUS else (-(-gpus // NODE_GPUS), NODE_GPUS)


def _within(fleet: Fleet, gpus: int, pods: int) -> str | None:
    """The widest tier below the whole cluster whose domain holds ``gpus``; None for one
    pod, or when no tier's domain is that large."""
    if pods <= 1:
        return None
    size, best = NODE_GPUS, None
    for tier, per in zip(fleet.tiers, fleet.layout, strict=False):
        size *= per
        if size >= gpus:
            best = tier
    return best


def generate(
    fleet: Fleet,
    *,
    load: float,
    hours: float,
    seed: int,
    mix: Sequence[SizeClass] = SIZE_MIX,
) -> list[GangJob]:
    """Gangs arriving over ``hours`` at offered load ``load`` on ``fleet``'s first GPU model
    (see the module docstring); a job larger than that model's GPUs is drawn again."""
    rng = random.Random(seed)
    model, capacity = next(iter(fleet.gpus.items()))
    classes = [c for c in mix if c.gpus <= capacity]
    weights = [c.share for c in classes]
    mean_work = sum(
        c.share * c.gpus * mean_minutes(c.gpus > NODE_GPUS) / 60 for c in classes
    ) / sum(weights)
    rate = load * capacity / mean_work  # jobs per hour
    jobs: list[GangJob] = []
    t = rng.expovariate(rate)
    while t < hours:
        c = rng.choices(classes, weights)[0]
        pods, per = gang_shape(c.gpus)
        duration = draw_minutes(rng, pods > 1) * 60
        jobs.append(
            GangJob(
                name=f"g{len(jobs):05d}",
                arrival_s=round(t * 3600),
                pods=pods,
                gpus_per_pod=per,
                duration_s=max(60, min(MAX_DURATION_S, round(duration))),
                within=_within(fleet, c.gpus, pods),
                gpu_model=model,
                team=fleet.teams[0] if fleet.teams else None,
            )
        )
        t += rng.expovariate(rate)
    return jobs


def read_gangs(path: Path) -> list[GangJob]:
    """The gangs of a workload CSV (see the module docstring), in arrival order."""
    seen: dict[str, int] = {}

    def job(line: int, row: dict[str, str]) -> GangJob:
        def text(column: str) -> str | None:
            return (row.get(column) or "").strip() or None

        return GangJob(
            name=unique_name(path, line, row, "name", seen),
            arrival_s=whole_number(path, line, row, "arrival_s", 0, 10**9),
            pods=whole_number(path, line, row, "pods", 1, 100_000),
            gpus_per_pod=whole_number(path, line, row, "gpus_per_pod", 1, 64),
            duration_s=whole_number(path, line, row, "duration_s", 1, 10**9),
            within=text("within"),
            gpu_model=text("gpu_model"),
            team=text("team"),
            line=line,
        )

    jobs = read_csv(path, COLUMNS[:5], job)
    return sorted(jobs, key=lambda j: j.arrival_s)


def check_jobs(path: str, jobs: Sequence[GangJob], fleet: Fleet) -> None:
    """Every job names a tier, model and team the fleet has, and fits it when empty — one
    line naming the file, line and column (with the nearest name) for the first that does not."""
    for j in jobs:
        where = f"{path}:{j.line}" if j.line else f"{path}: job {j.name}"
        for column, value, known in (
            ("within", j.within, fleet.tiers),
            ("gpu_model", j.gpu_model, tuple(fleet.gpus)),
            ("team", j.team, fleet.teams),
        ):
            if value is not None and value not in known:
                near = closest(value, list(known))
                hint = f"; did you mean {near!r}?" if near else ""
                have = ", ".join(known) or "none"
                raise PermanentError(
                    f"{where}: column {column}: {value!r} is not in the fleet ({have}){hint}"
                )
        model = j.gpu_model or next(iter(fleet.gpus))
        if j.gpus_per_pod > NODE_GPUS:
            raise PermanentError(
                f"{where}: column gpus_per_pod: {j.gpus_per_pod}, but a node has {NODE_GPUS}"
            )
        if j.gpus > fleet.gpus[model]:
            raise PermanentError(
                f"{where}: column pods: {j.pods} × {j.gpus_per_pod} GPUs is more than the "
                f"fleet's {fleet.gpus[model]} {model}"
            )


def gangs_csv(jobs: Sequence[GangJob]) -> str:
    """``jobs`` as a workload CSV that :func:`read_gangs` reads back the same."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for j in jobs:
        w.writerow(
            [
                j.name,
                j.arrival_s,
                j.pods,
                j.gpus_per_pod,
                j.duration_s,
                j.within or "",
                j.gpu_model or "",
                j.team or "",
            ]
        )
    return out.getvalue()
