"""The spool: step records kept on shared storage until MLflow has them.

Records live under one prefix per workflow run (``{storage-root}/runs/{uid}/lineage/`` in the
reference pipeline), so any later step — on any node — and ``gangway lineage sync`` can find
and replay what an earlier step could not send. ``NAME.json`` is a record; ``NAME.json.synced``
holds the record revision MLflow has, so a record is replayed again only when it changed.
``tracking-store`` names the store the records are for (the workflow's tracking URI), so a
later ``gangway lineage sync`` sends them there and not into whichever store is at hand.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field

from pydantic import ValidationError

from gangway import storage
from gangway.errors import NotFoundError, field_errors
from gangway.lineage.records import StepRecord

__all__ = ["Spool", "find_spools"]

_MARK = ".synced"
STORE_FILE = "tracking-store"
"""The object under a spool's root that names the tracking store its records are for."""


@dataclass(frozen=True)
class Spool:
    root: str
    store: str = ""
    """The tracking URI the records are for: written into the spool with each new record."""
    bad: dict[str, str] = field(default_factory=dict, compare=False)
    """Unreadable records seen by the last :meth:`records`: URI → why."""

    def write(self, rec: StepRecord) -> None:
        """Store a new revision of ``rec`` (atomically replacing the previous one)."""
        rec.rev += 1
        storage.write_bytes(storage.join(self.root, rec.file_name), rec.to_bytes())
        if self.store and rec.rev == 1:
            storage.write_bytes(storage.join(self.root, STORE_FILE), self.store.encode())

    def recorded_store(self) -> str | None:
        """The tracking URI the spool's records are for (None: a spool that does not say)."""
        try:
            text = storage.read_bytes(storage.join(self.root, STORE_FILE)).decode().strip()
        except NotFoundError:
            return None
        return text or None

    def mark_synced(self, rec: StepRecord, store: str = "") -> None:
        """``store`` (the tracking URI) has revision ``rec.rev`` of the record."""
        text = f"{rec.rev} {_store_key(store)}" if store else str(rec.rev)
        storage.write_bytes(storage.join(self.root, rec.file_name + _MARK), text.encode())

    def records(self, store: str = "") -> list[tuple[StepRecord, int]]:
        """Every readable record with the revision ``store`` has (0: none), oldest first.

        An unreadable record is reported on stderr (once per spool object) and in :attr:`bad`,
        and skipped.
        """
        objs = storage.list_objects(self.root)
        marks = {o.key[: -len(_MARK)] for o in objs if o.key.endswith(_MARK)}
        out: list[tuple[StepRecord, int]] = []
        told = set(self.bad)  # said by an earlier read: said once
        self.bad.clear()
        key_now = _store_key(store) if store else ""
        for o in objs:
            if not o.key.endswith(".json") or "/" in o.key:
                continue
            uri = storage.join(self.root, o.key)
            try:
                rec = StepRecord.from_bytes(storage.read_bytes(uri))
            except (ValidationError, ValueError) as e:
                why = _short(e)
                self.bad[uri] = why
                if uri not in told:
                    print(
                        f"warning: skipping unreadable lineage record {uri}: {why}", file=sys.stderr
                    )
                continue
            synced = 0
            if o.key in marks:
                rev, _, key = storage.read_bytes(uri + _MARK).decode().strip().partition(" ")
                # A mark without a store (older) counts for any store.
                same = not (key and store) or key == key_now
                synced = int(rev) if rev.isdigit() and same else 0
            out.append((rec, synced))
        out.sort(key=lambda rs: (rs[0].start_ms, rs[0].key))
        return out

    def pending(self, store: str = "") -> list[StepRecord]:
        """Records with a revision ``store`` (the tracking URI) does not have yet, oldest first.

        A record still ``RUNNING`` while a later attempt of the same node exists belongs to an
        attempt that was killed without a word (SIGKILL, node loss): it is closed as KILLED.
        """
        recs = self.records(store)
        latest: dict[tuple[str, str], int] = {}
        for rec, _ in recs:
            k = (rec.step, rec.node)
            latest[k] = max(latest.get(k, 0), rec.start_ms)
        out = []
        for rec, synced in recs:
            attempt = rec.kind == "step" and rec.status == "RUNNING"
            if attempt and latest[(rec.step, rec.node)] > rec.start_ms:
                rec.status = "KILLED"
                self.write(rec)
            if rec.rev > synced:
                out.append(rec)
        return out

    def close_running(self, status: str = "KILLED") -> int:
        """At the end of a workflow nothing is still running: close what says so."""
        n = 0
        for rec, _ in self.records():
            if rec.kind == "step" and rec.status == "RUNNING":
                rec.status = "KILLED" if status == "KILLED" else "FAILED"
                self.write(rec)
                n += 1
        return n


def _store_key(store: str) -> str:
    """Which store a mark is for: its URI and, for a sqlite store, which store is at that path
    now (a store moved away and another made there is not the one the record went to)."""
    from gangway.lineage.store import instance

    which = instance(store)
    text = f"{store}#{which}" if which else store  # a server: its URI, as marks always said
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _short(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return field_errors(e, root="(record)")
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def find_spools(uri: str) -> list[str]:
    """The spools at or under ``uri`` (a spool, a ``runs/`` prefix or a storage root)."""
    base = uri.rstrip("/")
    listed = storage.list_objects(base)
    if any(o.key.endswith(".json") and "/" not in o.key for o in listed):
        return [base]
    found = {
        o.key.rsplit("/", 1)[0]
        for o in listed
        if o.key.endswith(".json") and o.key.rsplit("/", 1)[0].endswith("lineage")
    }
    return [storage.join(base, k) for k in sorted(found)]
