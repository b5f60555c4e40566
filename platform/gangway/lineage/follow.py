"""Replaying spooled lineage off the steps' critical path (see :mod:`gangway.step.tracking`).

* :class:`Replayer` — inside ``gangway run``: a background thread that sends the run's spool
  to MLflow each time a step ends, so lineage appears as the run goes on while the next step
  already runs (MLflow is imported once, in ``gangway``, not in every step).
* :func:`follow` — ``gangway lineage sync --follow``: on a cluster, one per team namespace,
  sending every workflow's spool under the storage roots, pass after pass, until stopped. It
  catches up what exit handlers could not send (MLflow down, a workflow deleted mid-run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gangway.errors import PermanentError, describe
from gangway.lineage import SyncReport, sync
from gangway.lineage.records import StepRecord
from gangway.lineage.spool import Spool, find_spools
from gangway.lineage.store import same_store

__all__ = ["PASS_ERROR", "FollowPass", "Replayer", "follow", "follow_pass", "target_store"]


class Replayer:
    """Sends ``spool`` to ``tracking_uri`` on a background thread whenever :meth:`poke`d,
    one sync at a time; :meth:`close` waits for the sync under way. Never raises: the last
    error is kept in :attr:`error` (the run's end syncs again and reports)."""

    def __init__(self, spool: str, tracking_uri: str) -> None:
        self.spool, self.uri = Spool(spool), tracking_uri
        self.error: str | None = None
        self.sent = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="lineage-replay", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def close(self, timeout: float | None = None) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            if self._stop:
                return
            self._wake.clear()
            try:
                report = sync(self.spool, self.uri)
                self.sent += len(report.runs)
                self.error = report.error
            except Exception as e:  # lineage never fails the run; the end reports it
                self.error = f"{type(e).__name__}: {e}"


@dataclass
class FollowPass:
    """What one pass of :func:`follow` did."""

    found: int = 0
    """Spools under the roots."""
    spools: int = 0
    """Spools looked at (of this namespace, not known to be complete)."""
    sent: int = 0
    pending: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    """Spool → why a sync stopped (MLflow down, a record refused)."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Record URI → why it cannot be read (never sent)."""
    permanent: set[str] = field(default_factory=set)
    """Spools (of :attr:`errors`) that cannot be sent until something is fixed: their store
    is unusable, or they are for another store."""
    missing: list[str] = field(default_factory=list)
    """Roots on the local file system that do not exist (nothing can be read there)."""

    @property
    def read_roots(self) -> bool:
        """Whether the pass listed every root: none failed to list (``(pass)``), none missing.
        (Spools it then could not send do not count against it.)"""
        return PASS_ERROR not in self.errors and not self.missing


PASS_ERROR = "(pass)"
"""The key of :attr:`FollowPass.errors` for a pass that could not list its roots."""


def _missing(root: str) -> bool:
    """A local root that does not exist (an object store's absent prefix is only empty)."""
    from gangway import storage

    loc = storage.parse(root)
    return loc.scheme != "s3" and not loc.path.exists()


def follow_pass(
    roots: Sequence[str],
    tracking_uri: str | None,
    *,
    namespace: str | None,
    done: set[str],
    other_store: bool = False,
) -> FollowPass:
    """Sync every spool under ``roots`` once. ``done`` holds spools already complete (their
    workflow ended and MLflow has every record): skipped, and added to as more complete.
    ``namespace``: only spools of workflows in it.

    Each spool goes to the store it records (:meth:`Spool.recorded_store`), or to
    ``tracking_uri`` when given — into a store other than its own only with ``other_store``
    (:func:`target_store`). A spool that cannot be sent counts its records as pending."""
    out = FollowPass(missing=[r for r in roots if _missing(r)])
    found = [s for r in roots for s in find_spools(r)]
    out.found = len(found)
    for root in found:
        if root in done:
            continue
        spool = Spool(root)
        records: list[tuple[StepRecord, int]] = []
        try:
            records = spool.records()
            if namespace and not any(r.workflow.namespace == namespace for r, _ in records):
                continue
            out.spools += 1
            target = target_store(spool, tracking_uri, other_store=other_store)
            report: SyncReport = sync(spool, target)
        except Exception as e:  # this spool (access, a racing delete, its store): others go on
            out.errors[root] = describe(e)
            out.pending += _unsent(spool)
            if isinstance(e, PermanentError):
                out.permanent.add(root)
            continue
        out.sent += len(report.runs)
        out.pending += len(report.pending)
        if report.error:
            out.errors[root] = report.error
        if report.permanent:
            out.permanent.add(root)
        out.unreadable.update(spool.bad)
        ended = any(r.kind == "workflow" and r.status != "RUNNING" for r, _ in records)
        if ended and not report.pending and not report.error and not spool.bad:
            done.add(root)
    return out


def _unsent(spool: Spool) -> int:
    """How many of the spool's records no store has (0 when it cannot even be read)."""
    try:
        return sum(1 for rec, synced in spool.records() if rec.rev > synced)
    except Exception:
        return 0


def target_store(spool: Spool, tracking_uri: str | None, *, other_store: bool = False) -> str:
    """Where ``spool``'s records go: the store it records, unless ``tracking_uri`` names
    another — then only with ``other_store`` (a sync into a different store is asked for, never
    picked up from whatever store is at hand)."""
    recorded = spool.recorded_store()
    if tracking_uri is None:
        if recorded is None:
            raise PermanentError(
                "the spool does not say which MLflow store it is for (written before Gangway "
                "recorded it); pass --tracking-uri"
            )
        return recorded
    if recorded is not None and not same_store(recorded, tracking_uri) and not other_store:
        raise PermanentError(
            f"its records are for {recorded}, not {tracking_uri}; drop "
            "--tracking-uri (and MLFLOW_TRACKING_URI) to send them to their own store, or pass "
            "--other-store to send them to this one"
        )
    return tracking_uri


def follow(
    roots: Sequence[str],
    tracking_uri: str | None,
    *,
    interval: float,
    stop: threading.Event,
    namespace: str | None = None,
    other_store: bool = False,
    on_pass: Callable[[FollowPass], None] = lambda p: None,
) -> None:
    """Pass after pass (one every ``interval`` seconds) until ``stop`` is set; a pass that
    fails (storage unreachable) is reported and the next one tries again."""
    done: set[str] = set()
    while not stop.is_set():
        try:
            on_pass(
                follow_pass(
                    roots, tracking_uri, namespace=namespace, done=done, other_store=other_store
                )
            )
        except Exception as e:
            on_pass(FollowPass(errors={PASS_ERROR: describe(e)}))
        stop.wait(interval)
