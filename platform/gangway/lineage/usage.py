"""Usage accounting: device-hours, queue wait, run time and utilisation of step attempts over a
window, grouped by run, pipeline, team, queue, GPU model or step (``gangway usage``).

Pure functions. From lineage, over :class:`~gangway.lineage.attempts.Attempt` read back from
MLflow (:mod:`gangway.lineage.usage_store` reads them): every number is exact. From
Prometheus, the PromQL is written here and its samples turned into the same rows
(:mod:`gangway.cluster.usage` evaluates it); Prometheus holds device-seconds, attempts and
utilisation, not queue waits, run times, preemptions or GPU models.

What a window counts: the part of each attempt inside it — an attempt that started before
the window counts from the window's start, one still running up to its end (now) — so the
device-hours of consecutive windows add up. An attempt counts whole (its queue wait, whether
it survived a preemption) in every window it overlaps.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gangway.errors import PermanentError, closest
from gangway.lineage.attempts import Attempt

__all__ = [
    "DAY_MS",
    "GROUP_KEYS",
    "NONE",
    "PROM_LABELS",
    "Daily",
    "Sample",
    "UsageRow",
    "Used",
    "Window",
    "daily",
    "day_name",
    "day_starts",
    "parse_by",
    "parse_since",
    "prom_by",
    "prom_queries",
    "prom_rows",
    "survived",
    "usage_rows",
]

DAY_MS = 86_400_000

GROUP_KEYS: dict[str, str] = {
    "run": "workflow",
    "workflow": "workflow",
    "pipeline": "pipeline",
    "team": "team",
    "queue": "queue",
    "gpu_model": "gpu_model",
    "step": "step",
}
"""What ``--by`` takes → the :class:`Attempt` field it groups on (a run is its workflow)."""

PROM_LABELS = ("workflow", "pipeline", "team", "queue", "step")
"""The ``--by`` keys Prometheus's series carry as labels (not the GPU model)."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
NONE = "(none)"
"""How a group shows an attempt that recorded no value for its key (a team-less run)."""


def parse_since(text: str) -> float:
    """``--since``: a number and a unit (``30m``, ``12h``, ``7d``, ``2w``), in seconds."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2) not in _UNITS:
        raise PermanentError(
            f"--since {text!r}: give how far back as a number and a unit, s, m, h, d or w "
            "(30m, 12h, 7d, 2w)"
        )
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise PermanentError(f"--since {text!r}: must be more than zero (30m, 12h, 7d, 2w)")
    if seconds > 3660 * 86_400:
        raise PermanentError(f"--since {text!r}: at most ten years (520w)")
    return seconds


def parse_by(text: str) -> tuple[str, ...]:
    """``--by``: comma-separated keys of :data:`GROUP_KEYS`, as the fields they group on (in
    order, each once; ``run`` is ``workflow``)."""
    out: list[str] = []
    for raw in text.split(","):
        key = raw.strip().lower()
        if key not in GROUP_KEYS:
            near = closest(key, list(GROUP_KEYS))
            hint = f"did you mean {near!r}? " if near else ""
            raise PermanentError(
                f"--by {raw.strip()!r}: not a key; {hint}group by one or more of "
                f"{', '.join(GROUP_KEYS)}, comma-separated (--by team,queue)"
            )
        if GROUP_KEYS[key] not in out:
            out.append(GROUP_KEYS[key])
    return tuple(out)


@dataclass(frozen=True)
class Window:
    """From ``start_ms`` to ``end_ms`` (Unix ms): what ``--since`` spans up to now."""

    start_ms: int
    end_ms: int

    @classmethod
    def last(cls, seconds: float, now_ms: int) -> Window:
        return cls(now_ms - round(seconds * 1000), now_ms)

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000

    def holds(self, a: Attempt) -> bool:
        """Whether ``a`` ran at some time inside (a running attempt runs up to now)."""
        end = a.end_ms if a.end_ms is not None else self.end_ms
        return a.start_ms <= self.end_ms and end >= self.start_ms

    def inside_s(self, a: Attempt) -> float:
        """Seconds of ``a`` inside the window."""
        end = min(a.end_ms if a.end_ms is not None else self.end_ms, self.end_ms)
        return max(0, end - max(a.start_ms, self.start_ms)) / 1000


@dataclass(frozen=True)
class Used:
    """One attempt and the mean of its run's ``mfu`` metric (None where it logged none: on
    CPUs, and in steps other than training)."""

    attempt: Attempt
    mfu: float | None = None


@dataclass(frozen=True)
class UsageRow:
    """One group's usage over the window. None: not known from this source."""

    keys: dict[str, str]
    runs: int
    attempts: int | None
    gpu_hours: float
    cpu_hours: float
    wait_mean_s: float | None = None
    wait_max_s: float | None = None
    run_hours: float | None = None
    util: float | None = None
    """Device-seconds-weighted mean utilisation, 0–1: lineage's MFU, or DCGM's GPU use."""
    preemptions: int | None = None

    def to_json(self) -> dict[str, object]:
        body = {k: v for k, v in vars(self).items() if k != "keys"}
        return {**self.keys, **{k: _rounded(v) for k, v in body.items()}}


def _rounded(v: object) -> object:
    return round(v, 6) if isinstance(v, float) else v


def survived(used: Sequence[Used]) -> list[bool]:
    """For each attempt: whether it is a preemption its run survived — it ended KILLED and a
    later attempt of the same step of the same workflow started."""
    latest: dict[tuple[str, str], int] = {}
    for u in used:
        key = (u.attempt.workflow, u.attempt.step)
        latest[key] = max(latest.get(key, u.attempt.start_ms), u.attempt.start_ms)
    return [
        u.attempt.status == "KILLED"
        and latest[(u.attempt.workflow, u.attempt.step)] > u.attempt.start_ms
        for u in used
    ]


@dataclass
class _Group:
    """What a group adds up, attempt by attempt."""

    workflows: set[str] = field(default_factory=set)
    attempts: int = 0
    device_s: dict[str, float] = field(default_factory=lambda: {"gpu": 0.0, "cpu": 0.0})
    waits: list[float] = field(default_factory=list)
    run_s: float = 0.0
    util_sum: float = 0.0
    util_weight: float = 0.0
    preemptions: int = 0

    def add(self, u: Used, window: Window, preempted: bool) -> None:
        a = u.attempt
        inside = window.inside_s(a)
        self.workflows.add(a.workflow)
        self.attempts += 1
        kind = "gpu" if a.device == "gpu" else "cpu"
        self.device_s[kind] += a.devices * inside
        self.waits.append(a.queue_wait_s)
        self.run_s += inside
        if u.mfu is not None and math.isfinite(u.mfu):
            weight = max(a.devices * inside, 1e-9)  # an attempt of no length still counts
            self.util_sum += u.mfu * weight
            self.util_weight += weight
        self.preemptions += preempted

    def row(self, keys: dict[str, str]) -> UsageRow:
        return UsageRow(
            keys=keys,
            runs=len(self.workflows),
            attempts=self.attempts,
            gpu_hours=self.device_s["gpu"] / 3600,
            cpu_hours=self.device_s["cpu"] / 3600,
            wait_mean_s=sum(self.waits) / len(self.waits) if self.waits else None,
            wait_max_s=max(self.waits, default=None),
            run_hours=self.run_s / 3600,
            util=self.util_sum / self.util_weight if self.util_weight else None,
            preemptions=self.preemptions,
        )


def usage_rows(
    used: Sequence[Used], window: Window, by: Sequence[str], team: str | None = None
) -> list[UsageRow]:
    """The attempts inside ``window`` (of ``team`` alone when given), grouped by the
    :class:`Attempt` fields ``by`` (none: one row of it all); the most device-hours first."""
    groups: dict[tuple[str, ...], _Group] = {}
    for u, preempted in zip(used, survived(used), strict=True):
        a = u.attempt
        if (team is not None and a.team != team) or not window.holds(a):
            continue
        key = tuple(str(getattr(a, f)) or NONE for f in by)
        groups.setdefault(key, _Group()).add(u, window, preempted)
    rows = [g.row(dict(zip(by, k, strict=True))) for k, g in groups.items()]
    return sorted(rows, key=lambda r: (-(r.gpu_hours + r.cpu_hours), list(r.keys.values())))


@dataclass(frozen=True)
class Daily:
    """Device-hours of one kind (``gpu``, else ``cpu``) per team per UTC day."""

    device: str
    days: list[str]
    hours: dict[str, list[float]]
    """Team → its hours on each of :attr:`days`."""

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "days": self.days, "hours": self.hours}


def day_starts(window: Window) -> list[int]:
    """The Unix ms each UTC day the window touches starts at."""
    first = window.start_ms - window.start_ms % DAY_MS
    return list(range(first, window.end_ms, DAY_MS)) or [first]


def day_name(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def daily(used: Sequence[Used], window: Window, team: str | None = None) -> Daily:
    """GPU-hours per team per UTC day of ``window`` (CPU-hours when no attempt held a GPU):
    each attempt's hours split at midnight, what ``--plot`` draws."""
    device = "gpu" if any(u.attempt.device == "gpu" for u in used) else "cpu"
    starts = day_starts(window)
    hours: dict[str, list[float]] = {}
    for u in used:
        a = u.attempt
        if a.device != device or (team is not None and a.team != team):
            continue
        for i, day in enumerate(starts):
            part = Window(max(day, window.start_ms), min(day + DAY_MS, window.end_ms))
            if part.end_ms > part.start_ms:
                seconds = a.devices * part.inside_s(a)
                if seconds:
                    series = hours.setdefault(a.team or NONE, [0.0] * len(starts))
                    series[i] += seconds / 3600
    return Daily(device, [day_name(d) for d in starts], dict(sorted(hours.items())))


# ---- Prometheus ---------------------------------------------------------------------------


def prom_by(by: Sequence[str]) -> tuple[str, ...]:
    """``by`` as Prometheus labels; a key no series carries is refused, saying what to do."""
    missing = [k for k in by if k not in PROM_LABELS]
    if missing:
        raise PermanentError(
            f"--by {','.join(missing)}: Prometheus's series carry no such label (only "
            f"{', '.join(PROM_LABELS)}); leave out --prometheus to count it from MLflow lineage"
        )
    return tuple(by)


def _selector(name: str, team: str | None) -> str:
    return f"{name}{{team={json.dumps(team)}}}" if team is not None else name


def _in_window(name: str, team: str | None, window_ms: int) -> str:
    """Per series, what a counter added inside the last ``window_ms``: its highest value in
    the window less its last value before it (nothing before: it started inside, from 0).
    Counters only grow, so the highest value is the last one — unless the series was reset
    (a container restarted in the same pod), which is never counted as negative."""
    sel, r = _selector(name, team), f"[{window_ms}ms]"
    inside = f"max_over_time({sel}{r})"
    before = f"last_over_time({sel}{r} offset {window_ms}ms)"
    return f"clamp_min({inside} - ({before} or {inside} * 0), 0)"


def prom_queries(by: Sequence[str], window: Window, team: str | None = None) -> dict[str, str]:
    """The PromQL of each column, evaluated at the window's end: ``device_seconds`` and
    ``attempts`` (by ``by`` and ``device``), ``runs`` (workflows with samples inside), and
    utilisation — ``dcgm`` (DCGM's GPU use of the step's pods, 0–100, joined on namespace and
    pod) with ``mfu`` (the training step's model FLOPs utilisation) where DCGM has none."""
    ms = window.end_ms - window.start_ms
    labels = ", ".join(by)
    with_device = ", ".join([*by, "device"])
    r = f"[{ms}ms]"
    step_labels = ", ".join(PROM_LABELS)
    pods = (
        f"group by (namespace, pod, {step_labels}) "
        f"(last_over_time({_selector('gangway_step_start_time_seconds', team)}{r}))"
    )
    return {
        "device_seconds": f"sum by ({with_device}) "
        f"({_in_window('gangway_device_seconds_total', team, ms)})",
        "attempts": f"sum by ({labels}) ({_in_window('gangway_step_attempts_total', team, ms)})",
        "runs": f"count by ({labels}) (group by ({', '.join(dict.fromkeys([*by, 'workflow']))}) "
        f"(max_over_time({_selector('gangway_device_seconds_total', team)}{r})))",
        "dcgm": f"avg by ({labels}) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{r}) "
        f"* on (namespace, pod) group_left ({step_labels}) {pods}) / 100",
        "mfu": f"avg by ({labels}) "
        f"(avg_over_time({_selector('gangway_train_mfu_ratio', team)}{r}))",
    }


Sample = tuple[Mapping[str, str], float]
"""One series of an instant vector: its labels and value."""


def prom_rows(by: Sequence[str], samples: Mapping[str, Iterable[Sample]]) -> list[UsageRow]:
    """Rows from the samples of each query of :func:`prom_queries` (``dcgm`` and ``mfu``
    may be left out), the most device-hours first."""

    def key(labels: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(labels.get(k, "") or NONE for k in by)

    device: dict[tuple[str, ...], dict[str, float]] = {}
    for labels, value in samples.get("device_seconds", []):
        kind = "gpu" if labels.get("device") == "gpu" else "cpu"
        per = device.setdefault(key(labels), {"gpu": 0.0, "cpu": 0.0})
        per[kind] += value
    attempts = {key(lb): v for lb, v in samples.get("attempts", [])}
    runs = {key(lb): v for lb, v in samples.get("runs", [])}
    util = {key(lb): v for lb, v in samples.get("mfu", []) if math.isfinite(v)}
    util.update({key(lb): v for lb, v in samples.get("dcgm", []) if math.isfinite(v)})
    rows = [
        UsageRow(
            keys=dict(zip(by, k, strict=True)),
            runs=round(runs.get(k, 0)),
            attempts=round(attempts[k]) if k in attempts else None,
            gpu_hours=per["gpu"] / 3600,
            cpu_hours=per["cpu"] / 3600,
            util=util.get(k),
        )
        for k, per in device.items()
    ]
    return sorted(rows, key=lambda r: (-(r.gpu_hours + r.cpu_hours), list(r.keys.values())))
