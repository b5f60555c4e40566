"""Lineage in MLflow: records a step keeps (spooled first), their idempotent replay, and the
graph ``gangway lineage`` walks. See ``docs/lineage.md``.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangway.errors import PermanentError, describe
from gangway.lineage import store
from gangway.lineage.records import StepRecord
from gangway.lineage.spool import Spool
from gangway.lineage.store import sqlite_path, sqlite_uri

__all__ = ["SyncReport", "default_spool", "sqlite_path", "sqlite_uri", "sync"]


def default_spool(workflow_uid: str) -> str:
    """Where a step outside a pipeline spools (pipelines set ``GANGWAY_LINEAGE_SPOOL``)."""
    return str(Path(tempfile.gettempdir()) / "gangway-lineage" / (workflow_uid or "adhoc"))


@dataclass
class SyncReport:
    """What a sync sent: record key → (run id, run URL); what is left; why it stopped."""

    runs: dict[str, tuple[str, str]] = field(default_factory=dict)
    pending: list[StepRecord] = field(default_factory=list)
    error: str | None = None
    permanent: bool = False
    """The store is unusable as it is (not MLflow, another schema): sending again cannot help
    until it is fixed."""


def sync(spool: Spool, tracking_uri: str, *, always: Collection[str] = ()) -> SyncReport:
    """Replay every record of ``spool`` MLflow lacks, oldest first; stops at the first failure
    (the server is down: the rest stays spooled for the next step or ``gangway lineage sync``).

    Records whose key is in ``always`` are replayed even when marked sent (idempotent), so a
    step learns its own run id even if a concurrent step sent its record first — and every
    record is, into a sqlite store that does not exist (deleted or moved since it was sent).
    """
    report = SyncReport()
    todo = spool.pending(tracking_uri)
    if store.is_new(tracking_uri):  # its marks name a store that is gone: send it all again
        always = {*always, *(r.key for r, _ in spool.records())}
    keys = {r.key for r in todo}
    if set(always) - keys:
        extra = [r for r, _ in spool.records() if r.key in always and r.key not in keys]
        todo = sorted([*todo, *extra], key=lambda r: (r.start_ms, r.key))
    if not todo:
        return report
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # after import: it sets its own
    # MLflow resolves `models:/…` sources (model versions of logged models) through the
    # process-wide tracking URI, not the client's: point it at the same store — and put the
    # environment back after (set_tracking_uri exports it to every later subprocess).
    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(tracking_uri)
    try:
        try:  # a new sqlite store is built here, under its lock (concurrent writers wait)
            client = store.client(tracking_uri, write=True)
        except Exception as e:  # unusable or unreachable: every record stays pending
            return SyncReport(
                pending=todo, error=describe(e), permanent=isinstance(e, PermanentError)
            )
        return _replay_all(client, tracking_uri, spool, todo)
    finally:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


def _replay_all(client: Any, tracking_uri: str, spool: Spool, todo: list[StepRecord]) -> SyncReport:
    from gangway.lineage.replay import SyncIds, replay

    report = SyncReport()
    ids = SyncIds()
    for i, rec in enumerate(todo):
        try:
            report.runs[rec.key] = replay(client, tracking_uri, rec, ids)
        except Exception as e:
            report.error = f"{rec.file_name}: {type(e).__name__}: {_first_line(e)}"
            if _rejected(e):  # this record is at fault, not the server: go on with the rest
                report.pending.append(rec)
                continue
            report.pending += todo[i:]
            return report
        try:
            spool.mark_synced(rec, tracking_uri)
        except Exception as e:  # the next sync replays it again, harmlessly
            print(f"warning: could not mark {rec.file_name} synced: {e}", file=sys.stderr)
    return report


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else ""


def _rejected(e: BaseException) -> bool:
    """True when MLflow answered and refused the request (a 4xx other than 429)."""
    status = getattr(e, "get_http_status_code", lambda: None)()
    return isinstance(status, int) and 400 <= status < 500 and status != 429
