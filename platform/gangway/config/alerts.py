"""The platform config's ``alerts:`` block: the thresholds of the rendered alerting rules
(:mod:`gangway.render.alerts`), platform-wide defaults and per-queue overrides.

Durations are written as Prometheus writes them (``30s``, ``10m``, ``2h``, ``1d``) and used in
the rules as given; a threshold a rule compares with is the same duration in seconds
(:func:`seconds`). Every field is optional: the block, a queue's entry and ``defaults`` fill in
from :data:`BUILT_IN`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "BUILT_IN",
    "Alerts",
    "Duration",
    "NightlyEval",
    "Thresholds",
    "seconds",
]

_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> int:
    """``10m`` → 600 (a duration :data:`Duration` accepted)."""
    found = _DURATION.match(duration)
    if found is None:
        raise ValueError(f"{duration!r} is not a duration")
    return int(found.group(1)) * _UNIT[found.group(2)]


def _duration(v: str) -> str:
    if _DURATION.match(v) is None:
        raise ValueError(f"{v!r} is not a duration: a number and a unit (30s, 10m, 2h, 1d)")
    return v


Duration = Annotated[str, AfterValidator(_duration)]
"""A Prometheus duration in one unit: ``30s``, ``10m``, ``2h``, ``1d``."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Thresholds(_Model):
    """The thresholds that may differ by queue; a field left out falls back to
    ``alerts.defaults``, then to :data:`BUILT_IN`."""

    pending: Duration | None = None
    """GangwayGangPendingTooLong: the queue's oldest pending gang waited longer than this."""
    stall_factor: float | None = Field(None, ge=1, le=1000)
    """GangwayTrainingStalled: no optimizer step for this many times the recent step time …"""
    stall_floor: Duration | None = None
    """… and for at least this long (checkpoint saves and restarts stay under it)."""
    checkpoint_factor: float | None = Field(None, gt=1, le=100)
    """GangwayCheckpointStale: the last checkpoint is older than this many times the median
    interval between the run's recent saves."""
    gpu_idle: Duration | None = None
    """GangwayGPUsIdle: a training pod's GPUs showed no use (DCGM) for this long."""


BUILT_IN = Thresholds(
    pending="30m", stall_factor=10, stall_floor="10m", checkpoint_factor=3, gpu_idle="30m"
)
"""The thresholds of a config that says nothing."""


class NightlyEval(_Model):
    """Which pipeline is the nightly eval, and where it runs: its alerts are rendered only for
    these clusters (elsewhere it would always be missing)."""

    pipeline: str = "nightly-eval"
    gate_step: str = "gate"
    """The step that fails (exit 1) when a version regressed; it ends every night that scored."""
    clusters: list[str] = Field(default_factory=list)
    max_age: Duration = "26h"
    """GangwayNightlyEvalMissing: no gate result for this long (a day and the run's length)."""


class Alerts(_Model):
    """Thresholds of the alerting rules rendered into each cluster with a ``prometheus_url``."""

    runbook_base_url: str | None = None
    """Each alert's ``runbook_url`` is ``BASE/ALERT.md``: an absolute http(s) URL where the
    runbooks (``docs/runbooks``) are published, as Alertmanager and Slack open it
    (``https://github.com/ORG/REPO/blob/main/docs/runbooks``); a relative one is refused
    (:mod:`gangway.config.checks`). Unset: the rules carry no ``runbook_url``."""
    confirm_for: Duration = "2m"
    """The ``for:`` of alerts whose expression is already an age (pending, stalled, checkpoint,
    nightly eval, a stale exporter): how long the condition must hold."""
    defaults: Thresholds = Field(default_factory=Thresholds)
    queues: dict[str, Thresholds] = Field(default_factory=dict)
    """Queue name → what differs for it."""
    starved_for: Duration = "15m"
    """GangwayQueueStarved: under its guarantee with gangs pending for this long."""
    spool_backlog_records: int = Field(100, ge=1)
    spool_backlog_for: Duration = "15m"
    """GangwayLineageSpoolBacklog: at least this many records waiting, for this long."""
    exporter_stale: Duration = "10m"
    """GangwayExporterDown: no exporter series, or its last snapshot older than this."""
    follower_stale: Duration = "10m"
    """GangwayLineageFollowerFailing: errors in this window and no pass that read the spool
    in it (none ever, or the last one older than this)."""
    nightly_eval: NightlyEval = Field(default_factory=NightlyEval)

    def threshold(self, queue: str | None, field: str) -> str | float:
        """``field``'s value for ``queue`` (None: the platform's default)."""
        for layer in (self.queues.get(queue or ""), self.defaults, BUILT_IN):
            value = getattr(layer, field) if layer is not None else None
            if value is not None:
                return value  # type: ignore[no-any-return]
        raise KeyError(field)

    def overrides(self, field: str) -> dict[str, str | float]:
        """Queue → its own ``field``, for the queues that set it."""
        return {q: v for q, t in self.queues.items() if (v := getattr(t, field)) is not None}
