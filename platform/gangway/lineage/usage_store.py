"""Reading step attempts for usage out of MLflow (thin I/O): every Gangway step run as an
:class:`~gangway.lineage.attempts.Attempt`, with the mean of its ``mfu`` metric where it
logged one. What they add up to is decided in :mod:`gangway.lineage.usage`.
"""

from __future__ import annotations

import functools
from typing import Any

from gangway.lineage.attempts import TEAM, Attempt
from gangway.lineage.query import pages
from gangway.lineage.records import T
from gangway.lineage.usage import Used, Window

__all__ = ["MFU", "load_used"]

MFU = "mfu"
"""The metric key training logs its model FLOPs utilisation under (GPUs only)."""


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def load_used(client: Any, window: Window | None = None, team: str | None = None) -> list[Used]:
    """Every step attempt in the tracking store behind ``client`` (of ``team`` alone when
    given). The ``mfu`` history is read only for attempts inside ``window`` (one request a
    run): what falls outside is still returned, since a preemption inside the window is
    told by a later attempt."""
    exp_ids = [e.experiment_id for e in pages(client.search_experiments)]
    wanted = f"tags.`{T}.kind` = 'step'"
    if team is not None:
        wanted += f" and tags.`{TEAM}` = '{_quoted(team)}'"
    out: list[Used] = []
    for i in range(0, len(exp_ids), 100):
        fetch = functools.partial(
            client.search_runs, exp_ids[i : i + 100], wanted, max_results=1000
        )
        for r in pages(fetch):
            end = r.info.end_time
            attempt = Attempt.from_run(
                dict(r.data.tags),
                int(r.info.start_time or 0),
                int(end) if end else None,
                str(r.info.status),
            )
            mfu = None
            if MFU in r.data.metrics and (window is None or window.holds(attempt)):
                history = [m.value for m in client.get_metric_history(r.info.run_id, MFU)]
                mfu = sum(history) / len(history) if history else None
            out.append(Used(attempt, mfu))
    return out
