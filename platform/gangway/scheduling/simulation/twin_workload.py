"""The fleet twin's workload: gangs over time, each with what the platform's decisions read —
arrival, team, queue, priority class, N pods × G GPUs, GPU model, the topology tier it must stay
within — and what the replay needs: how long it runs and how often it saves a checkpoint.

Three sources:

* **a CSV file** (:func:`read_twin_gangs`): ``name, arrival_s, team, pods, gpus_per_pod,
  duration_s`` and optionally ``gpu_model``, ``within``, ``priority_class``, ``queue`` and
  ``checkpoint_s`` (empty: the team's model, anywhere, the team's default class and queue, the
  run's ``--checkpoint-every``); every mistake one line naming the file, line and column;
* **the generator** (:func:`generate_twin`), the published job-size and duration mixes of
  :mod:`~gangway.scheduling.simulation.gang_workload` (Philly's sizes via Gavel up to a node,
  a multi-node tail to Helios's mean of 3.716 GPUs a job; Gavel's durations, longer for
  multi-node jobs), arriving as a Poisson process at ``load`` × the fleet's GPUs. Per job, on
  top of that: its **team** drawn in proportion to the teams' deserved GPUs; its **priority
  class** the team's default (first) class 70 % of the time, its other classes sharing the
  rest equally; its **GPU model** among those the team's quota names, in proportion to the
  fleet's GPUs of each; its **topology**: a multi-pod gang stays within the widest tier below
  the whole cluster whose largest domain of that model holds it;
* **the openb trace's own clock** (:func:`read_openb`): each GPU pod of Alibaba's
  cluster-trace-gpu-v2023 pod list is a one-pod gang arriving at its ``creation_time``,
  running ``deletion_time`` − ``scheduled_time`` seconds (until the trace's last timestamp when
  it was never deleted), its ``qos`` mapped to a priority class (``LS`` and ``Guaranteed`` →
  the team's highest class, ``Burstable`` → its default, ``BE`` → its lowest). The trace names
  no teams and (in ``default``) no GPU models: each pod's team and model are drawn from a hash
  of its name, in the generator's proportions; a shared-GPU pod (``gpu_milli`` < 1000) takes a
  whole GPU (the platform's gangs do not share GPUs).
"""

from __future__ import annotations

import csv
import io
import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gangway.errors import PermanentError
from gangway.scheduling.simulation.fleet import NODE_GPUS
from gangway.scheduling.simulation.gang_workload import (
    MAX_DURATION_S,
    SIZE_MIX,
    SizeClass,
    draw_minutes,
    gang_shape,
    mean_minutes,
)
from gangway.scheduling.simulation.trace import read_csv, unique_name, whole_number
from gangway.scheduling.simulation.twin_fleet import TwinFleet
from gangway.scheduling.snapshot.cluster_state import Snapshot

__all__ = [
    "DEFAULT_CLASS_SHARE",
    "TWIN_COLUMNS",
    "TwinGang",
    "generate_twin",
    "read_openb",
    "read_twin_gangs",
    "twin_csv",
]

TWIN_COLUMNS = (
    "name",
    "arrival_s",
    "team",
    "pods",
    "gpus_per_pod",
    "duration_s",
    "gpu_model",
    "within",
    "priority_class",
    "queue",
    "checkpoint_s",
)
DEFAULT_CLASS_SHARE = 0.7
"""Of a team's generated gangs, those of its default (first) priority class."""


@dataclass(frozen=True)
class TwinGang:
    name: str
    arrival_s: int
    team: str
    pods: int
    gpus_per_pod: int
    duration_s: int
    gpu_model: str | None = None
    within: str | None = None
    priority_class: str | None = None
    queue: str | None = None
    checkpoint_s: int | None = None
    """Seconds between checkpoints; None: the run's default; 0: never saves one."""
    line: int = field(default=0, compare=False)

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def _team_weights(snap: Snapshot) -> dict[str, float]:
    """Team → its queue's deserved GPUs over the clusters (1 where it deserves none)."""
    out = {}
    for name, t in snap.teams.items():
        got = sum(
            max(q.deserved.get("gpu", 0), q.guarantee.get("gpu", 0))
            for c in snap.clusters.values()
            if (q := c.queues.get(t.queue)) is not None
        )
        out[name] = float(got or 1)
    return out


def _models(fleet: TwinFleet) -> dict[str, tuple[list[str], list[float]]]:
    """Team → the GPU models it may use and the fleet's GPUs of each (its weights)."""
    per_model: dict[str, int] = {}
    for (_, model), n in fleet.gpus.items():
        per_model[model] = per_model.get(model, 0) + n
    out = {}
    for name, t in fleet.snapshot.teams.items():
        models = [m for m in per_model if t.gpu_types is None or m in t.gpu_types]
        out[name] = (models, [float(per_model[m]) for m in models])
    return out


def _largest_domains(snap: Snapshot) -> dict[tuple[str, str], int]:
    """(GPU model, tier) → the most GPUs of that model one domain of the tier holds."""
    out: dict[tuple[str, str], int] = {}
    for c in snap.clusters.values():
        sums: dict[tuple[str, str, str], int] = {}
        for n in c.nodes:
            for tier in c.tiers:
                if n.gpu_type and tier in n.domains:
                    k = (n.gpu_type, tier, n.domains[tier])
                    sums[k] = sums.get(k, 0) + n.allocatable.gpus
        for (model, tier, _), gpus in sums.items():
            out[(model, tier)] = max(out.get((model, tier), 0), gpus)
    return out


def _within(
    snap: Snapshot, largest: Mapping[tuple[str, str], int], model: str, gpus: int
) -> str | None:
    """The widest tier (below the whole cluster) one of whose domains holds ``gpus``."""
    tiers = next((c.tiers for c in snap.clusters.values() if c.tiers), [])
    fits = [t for t in tiers if largest.get((model, t), 0) >= gpus]
    return fits[-1] if fits else None


def _classes(snap: Snapshot, team: str) -> tuple[list[str], list[float]]:
    classes = snap.teams[team].priority_classes
    if len(classes) == 1:
        return classes, [1.0]
    rest = (1 - DEFAULT_CLASS_SHARE) / (len(classes) - 1)
    return classes, [DEFAULT_CLASS_SHARE] + [rest] * (len(classes) - 1)


def generate_twin(
    fleet: TwinFleet,
    *,
    load: float,
    hours: float,
    seed: int,
    mix: Sequence[SizeClass] = SIZE_MIX,
) -> list[TwinGang]:
    """Gangs arriving over ``hours`` at offered load ``load`` × the fleet's GPUs (see the
    module docstring); the same ``seed`` gives the same gangs."""
    rng = random.Random(seed)
    snap = fleet.snapshot
    capacity = sum(fleet.gpus.values())
    largest = _largest_domains(snap)
    biggest = max(largest.values(), default=NODE_GPUS)
    classes = [c for c in mix if c.gpus <= max(biggest, NODE_GPUS)]
    weights = [c.share for c in classes]
    mean_work = sum(
        c.share * c.gpus * mean_minutes(c.gpus > NODE_GPUS) / 60 for c in classes
    ) / sum(weights)
    rate = load * capacity / mean_work  # jobs per hour
    teams = _team_weights(snap)
    models = _models(fleet)
    jobs: list[TwinGang] = []
    t = rng.expovariate(rate)
    while t < hours:
        team = rng.choices(list(teams), list(teams.values()))[0]
        names, shares = _classes(snap, team)
        cls = rng.choices(names, shares)[0]
        size = rng.choices(classes, weights)[0].gpus
        model = rng.choices(*models[team])[0]
        pods, per = gang_shape(size)
        duration = draw_minutes(rng, pods > 1) * 60
        jobs.append(
            TwinGang(
                name=f"g{len(jobs):06d}",
                arrival_s=round(t * 3600),
                team=team,
                pods=pods,
                gpus_per_pod=per,
                duration_s=max(60, min(MAX_DURATION_S, round(duration))),
                gpu_model=model,
                within=_within(snap, largest, model, size) if pods > 1 else None,
                priority_class=cls,
            )
        )
        t += rng.expovariate(rate)
    return jobs


def read_twin_gangs(path: Path) -> list[TwinGang]:
    """The gangs of a twin workload CSV (see the module docstring), in arrival order."""
    seen: dict[str, int] = {}

    def gang(line: int, row: dict[str, str]) -> TwinGang:
        def text(column: str) -> str | None:
            return (row.get(column) or "").strip() or None

        team = text("team")
        if team is None:
            raise PermanentError(f"{path}:{line}: column team: empty; name the gang's team")
        ckpt = text("checkpoint_s")
        return TwinGang(
            name=unique_name(path, line, row, "name", seen),
            arrival_s=whole_number(path, line, row, "arrival_s", 0, 10**9),
            team=team,
            pods=whole_number(path, line, row, "pods", 1, 100_000),
            gpus_per_pod=whole_number(path, line, row, "gpus_per_pod", 1, 64),
            duration_s=whole_number(path, line, row, "duration_s", 1, 10**9),
            gpu_model=text("gpu_model"),
            within=text("within"),
            priority_class=text("priority_class"),
            queue=text("queue"),
            checkpoint_s=(
                None if ckpt is None else whole_number(path, line, row, "checkpoint_s", 0, 10**9)
            ),
            line=line,
        )

    gangs = read_csv(path, TWIN_COLUMNS[:6], gang)
    return sorted(gangs, key=lambda g: g.arrival_s)


def _qos_class(snap: Snapshot, team: str, qos: str) -> str:
    """The team's class for an openb ``qos``: LS/Guaranteed its highest, BE its lowest."""
    classes = snap.teams[team].priority_classes
    by_value = sorted(
        classes,
        key=lambda c: -(snap.priority_classes[c].value if c in snap.priority_classes else 0),
    )
    if qos in ("LS", "Guaranteed"):
        return by_value[0]
    if qos == "BE":
        return by_value[-1]
    return classes[0]


def _pick(name: str, salt: str, options: Sequence[str], weights: Sequence[float]) -> str:
    """A weighted choice decided by a hash of ``name``: the same pod, the same choice."""
    u = zlib.crc32(f"{salt}:{name}".encode()) / 2**32 * sum(weights)
    for option, w in zip(options, weights, strict=True):
        if u < w:
            return option
        u -= w
    return options[-1]


def read_openb(
    path: Path, fleet: TwinFleet, *, start_h: float = 0.0, hours: float | None = None
) -> list[TwinGang]:
    """The GPU pods of an openb pod list (``creation_time``, ``deletion_time``, ``qos``) as
    one-pod gangs on the trace's own clock (see the module docstring): those created from
    ``start_h`` hours into the trace, for ``hours`` (None: to its end), their clock starting
    there. (In ``default``, 90 % of the GPU pods are created in its last 30 of 149 days.)"""
    columns = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time")

    def row_of(line: int, row: dict[str, str]) -> tuple[int, dict[str, str]]:
        return line, row

    rows = read_csv(path, columns, row_of)
    snap = fleet.snapshot
    teams = _team_weights(snap)
    models = _models(fleet)
    end = max(int(r.get("deletion_time") or r["creation_time"] or 0) for _, r in rows)
    out: list[TwinGang] = []
    for line, row in rows:
        gpus = whole_number(path, line, row, "num_gpu", 0, 64)
        if gpus == 0:
            continue  # the twin replays GPU gangs; CPU-only pods are left out
        start = whole_number(path, line, row, "creation_time", 0, 10**10)
        ran_from = int((row.get("scheduled_time") or "").strip() or start)
        deleted = (row.get("deletion_time") or "").strip()
        stop = whole_number(path, line, row, "deletion_time", 0, 10**10) if deleted else end
        name = row["name"].strip()
        team = _pick(name, "team", list(teams), list(teams.values()))
        spec = [m for m in (row.get("gpu_spec") or "").split("|") if m in models[team][0]]
        model = spec[0] if spec else _pick(name, "model", *models[team])
        out.append(
            TwinGang(
                name=name,
                arrival_s=start,
                team=team,
                pods=1,
                gpus_per_pod=min(gpus, NODE_GPUS),
                duration_s=max(1, stop - max(ran_from, start)),
                gpu_model=model,
                priority_class=_qos_class(snap, team, row["qos"].strip()),
                line=line,
            )
        )
    lo = round(start_h * 3600)
    hi = None if hours is None else lo + round(hours * 3600)
    out = [
        replace(g, arrival_s=g.arrival_s - lo)
        for g in out
        if g.arrival_s >= lo and (hi is None or g.arrival_s < hi)
    ]
    return sorted(out, key=lambda g: (g.arrival_s, g.name))


def twin_csv(gangs: Sequence[TwinGang]) -> str:
    """``gangs`` as a twin workload CSV that :func:`read_twin_gangs` reads back the same."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(TWIN_COLUMNS)
    for g in gangs:
        w.writerow(
            [
                g.name,
                g.arrival_s,
                g.team,
                g.pods,
                g.gpus_per_pod,
                g.duration_s,
                g.gpu_model or "",
                g.within or "",
                g.priority_class or "",
                g.queue or "",
                "" if g.checkpoint_s is None else g.checkpoint_s,
            ]
        )
    return out.getvalue()
