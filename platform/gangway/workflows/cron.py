"""A pipeline on a schedule: an Argo CronWorkflow that runs the pipeline's WorkflowTemplate, so
the same workflow can be launched by hand (``gangway submit``) and runs locally as it is
(``gangway run``, which runs the template once).

Argo's own defaults are not what an unattended job wants, so every field is explicit:
``schedules`` (the plural field; the singular is deprecated since Argo 3.6), a ``timezone``
(default: the controller's, which nobody remembers), ``concurrencyPolicy: Forbid`` (a slow
night never overlaps the next), ``startingDeadlineSeconds`` (a controller that was down
catches up a missed run within this window, not a week of them) and history limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hera.workflows import CronWorkflow, WorkflowTemplate
from hera.workflows import models as m

from gangway.errors import PermanentError

__all__ = ["scheduled"]

_FIELD = r"[\d*/,\-A-Za-z?]+"
_CRON = re.compile(rf"^{_FIELD}( {_FIELD}){{4}}$|^@(yearly|annually|monthly|weekly|daily|hourly)$")


def scheduled(
    template: WorkflowTemplate,
    *,
    schedules: Sequence[str],
    timezone: str,
    starting_deadline_seconds: int = 3600,
    successful_jobs_history_limit: int = 7,
    failed_jobs_history_limit: int = 14,
) -> CronWorkflow:
    """A CronWorkflow named like ``template`` that runs it on ``schedules`` (cron lines) in
    ``timezone`` (an IANA name), never two at once. Define it at module level beside the
    template."""
    bad = [s for s in schedules if not _CRON.match(s.strip())]
    if not schedules or bad:
        raise PermanentError(
            f"schedules={list(schedules)!r}: give cron lines of five fields, e.g. '0 2 * * *'"
        )
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise PermanentError(
            f"timezone={timezone!r}: give an IANA time zone such as 'UTC' or 'Europe/London'"
        ) from None
    if starting_deadline_seconds < 1:
        raise PermanentError("starting_deadline_seconds: give at least 1")
    labels = dict(template.labels or {})
    return CronWorkflow(
        name=template.name,
        labels=labels,
        annotations=dict(template.annotations or {}),
        schedules=list(schedules),
        timezone=timezone,
        concurrency_policy="Forbid",
        starting_deadline_seconds=starting_deadline_seconds,
        successful_jobs_history_limit=successful_jobs_history_limit,
        failed_jobs_history_limit=failed_jobs_history_limit,
        workflow_template_ref=m.WorkflowTemplateRef(name=template.name),
        workflow_metadata=m.WorkflowMetadata(labels=labels),
    )
