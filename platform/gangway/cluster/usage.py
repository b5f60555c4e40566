"""Usage from Prometheus (thin I/O): the queries of :func:`gangway.lineage.usage.prom_queries`
evaluated through :mod:`gangway.cluster.prometheus` at the window's end, and their samples
turned into rows and a per-day series by :mod:`gangway.lineage.usage`.
"""

from __future__ import annotations

from collections.abc import Sequence

from gangway.cluster.prometheus import query
from gangway.errors import GangwayError, TransientError
from gangway.lineage.usage import (
    DAY_MS,
    NONE,
    Daily,
    Sample,
    UsageRow,
    Window,
    day_name,
    day_starts,
    prom_by,
    prom_queries,
    prom_rows,
)

__all__ = ["prom_daily", "prom_usage"]


def _samples(url: str, promql: str, at_ms: int) -> list[Sample]:
    return [(s.labels, s.value) for s in query(url, promql, at=at_ms / 1000)]


def prom_usage(
    url: str, by: Sequence[str], window: Window, team: str | None = None
) -> tuple[list[UsageRow], str]:
    """The rows of ``window`` grouped by ``by``, and where their utilisation came from
    (``dcgm``, ``mfu`` or ``none``). DCGM's query is asked only when the server has its
    series, and a server that refuses the join (pods without namespace and pod labels) falls
    back to MFU."""
    labels = prom_by(by)
    queries = prom_queries(labels, window, team)
    at = window.end_ms
    got = {k: _samples(url, queries[k], at) for k in ("device_seconds", "attempts", "runs")}
    source = "none"
    ms = window.end_ms - window.start_ms
    if _samples(url, f"count(last_over_time(DCGM_FI_DEV_GPU_UTIL[{ms}ms]))", at):
        try:
            got["dcgm"] = _samples(url, queries["dcgm"], at)
        except TransientError:
            raise
        except GangwayError:
            got["dcgm"] = []
        source = "dcgm" if got["dcgm"] else source
    got["mfu"] = _samples(url, queries["mfu"], at)
    if source == "none" and got["mfu"]:
        source = "mfu"
    return prom_rows(labels, got), source


def prom_daily(url: str, window: Window, team: str | None = None) -> Daily:
    """Device-hours per team per UTC day of ``window``: one query a day, each over the part
    of that day inside the window; GPU-hours, or CPU-hours when no series holds a GPU."""
    starts = day_starts(window)
    per_day: list[list[Sample]] = []
    for day in starts:
        part = Window(max(day, window.start_ms), min(day + DAY_MS, window.end_ms))
        promql = prom_queries(("team",), part, team)["device_seconds"]
        per_day.append(_samples(url, promql, part.end_ms))
    kinds = {lb.get("device") for samples in per_day for lb, v in samples if v > 0}
    device = "gpu" if "gpu" in kinds else "cpu"
    hours: dict[str, list[float]] = {}
    for i, samples in enumerate(per_day):
        for lb, v in samples:
            if lb.get("device") == device and v > 0:
                hours.setdefault(lb.get("team") or NONE, [0.0] * len(starts))[i] += v / 3600
    names = [day_name(d) for d in starts]
    return Daily(device, names, dict(sorted(hours.items())))
