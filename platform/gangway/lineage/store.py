"""The MLflow tracking store lineage goes to: opened for reading without ever changing it, or
for writing with its creation and migration done once, under a lock.

MLflow creates a sqlite store's tables (and migrates them) the first time a client touches it,
with no lock: two processes doing so at once — two ``gangway run`` in a fresh state
directory, two syncs into a new file — interleave their migrations and can leave the store
half-built for good (``table _alembic_tmp_experiments already exists`` on every later write).
Here a writer takes an exclusive lock (``mlflow.db.lock`` beside the file) while it looks at
the store and, if it is missing or incomplete, builds it; every other writer waits and then
finds it complete. A store an earlier race left half-built is repaired under the same lock:
the migration's leftover temporary tables are dropped and the migration finished; one that
cannot be finished and holds no run is set aside (never deleted) and built anew.

A reader never creates or migrates: a missing file, an incomplete store or one at another
schema is a clear error (MLflow would otherwise migrate it on a read).

An http(s) server migrates its own database: only whether it answers is checked, in seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gangway.errors import NotFoundError, PermanentError, TransientError, describe
from gangway.lineage.sqlite_state import (
    SqliteState,
    db_utils,
    hot_journal,
    inspect_sqlite,
    instance,
    sqlite_path,
    sqlite_uri,
)

__all__ = [
    "SqliteState",
    "check",
    "client",
    "inspect_sqlite",
    "instance",
    "is_new",
    "prepare",
    "same_store",
    "sqlite_path",
    "sqlite_uri",
]


def client(uri: str, *, write: bool) -> Any:
    """An ``MlflowClient`` on ``uri`` after :func:`prepare` (raises what it raises)."""
    prepare(uri, write=write)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def prepare(uri: str, *, write: bool) -> bool:
    """Make ``uri`` ready: a writer gets a complete sqlite store (built or repaired under the
    lock); a reader gets an error naming what is wrong instead of a changed store. True when
    the writer built it from nothing (a new file, or one deleted since): it holds no record."""
    _refuse_scheme(uri)
    path = sqlite_path(uri)
    if path is None:
        return False
    if not write:
        with _lock(path, shared=True):
            _refuse_to_read(uri, inspect_sqlite(path))
        return False
    with _lock(path, shared=False):
        if hot_journal(path):
            _roll_back(path)
        state = inspect_sqlite(path)
        if state.condition == "current":
            return False
        _build(uri, path, state)
        return state.condition in ("missing", "empty")


def is_new(uri: str) -> bool:
    """Whether ``uri`` is a sqlite store that does not exist yet (or holds nothing): nothing is
    in it, whatever a spool's marks say (it was deleted, moved, or never made)."""
    path = sqlite_path(uri)
    return path is not None and inspect_sqlite(path).condition in ("missing", "empty")


def same_store(a: str, b: str) -> bool:
    """Whether two tracking URIs name one store (``sqlite:////x/../x/m.db`` is
    ``sqlite:////x/m.db``; a trailing ``/`` on a server's URL does not count)."""
    pa, pb = sqlite_path(a), sqlite_path(b)
    if pa is not None and pb is not None:
        return os.path.normpath(pa.absolute()) == os.path.normpath(pb.absolute())
    return a.rstrip("/") == b.rstrip("/")


_DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


def _refuse_scheme(uri: str) -> None:
    """A tracking URI MLflow can keep runs at: an http(s) server or a database URL."""
    scheme = uri.split("://", 1)[0].split("+", 1)[0].lower() if "://" in uri else ""
    if scheme == "sqlite" and sqlite_path(uri) is None:
        raise PermanentError(
            f"tracking URI {uri!r}: an in-memory sqlite store keeps nothing; use "
            "sqlite:///PATH/mlflow.db (three slashes, then the path)"
        )
    if scheme in ("http", "https", *_DB_SCHEMES):
        return
    if scheme in ("", "file"):
        raise PermanentError(
            f"tracking URI {uri!r}: a directory of runs (MLflow's file store, in maintenance "
            "mode in this MLflow) is not a store Gangway records to; use sqlite:///PATH/"
            "mlflow.db or an http(s):// tracking server"
        )
    raise PermanentError(
        f"tracking URI {uri!r}: unsupported scheme {scheme!r}; use http(s)://HOST:PORT, "
        "sqlite:///PATH/mlflow.db or a database URL (postgresql://…, mysql://…)"
    )


def _roll_back(path: Path) -> None:
    """Let sqlite roll back what a killed writer left in the journal (a read-write open does;
    a read-only one cannot, and sees no tables at all)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("select count(*) from sqlite_master").fetchone()


def check(uri: str, *, write: bool, timeout: float = 5.0) -> None:
    """Fail in seconds, with what to do, when the store is not there or not usable — a server
    that does not answer (or is not MLflow), a sqlite file that a reader would have to create
    or migrate, one a writer may not build on its own or not an MLflow store at all — without
    changing anything (a writer builds the store when it has something to write)."""
    _refuse_scheme(uri)
    path = sqlite_path(uri)
    if path is not None:
        state = inspect_sqlite(path)
        if not write:
            _refuse_to_read(uri, state)
        elif not state.writable:
            raise PermanentError(_unusable(uri, state))
        return
    if uri.startswith(("http://", "https://")):
        _check_server(uri, timeout)


def _refuse_to_read(uri: str, state: SqliteState) -> None:
    if state.condition == "missing":
        raise NotFoundError(f"{uri}: no MLflow store there (no such file); check the path")
    if state.condition != "current":
        raise PermanentError(_unusable(uri, state))


def _unusable(uri: str, state: SqliteState) -> str:
    """Why the store cannot be used as it is, and what to do."""
    if state.condition in ("foreign", "empty"):
        damaged = state.detail and "no MLflow tables" not in state.detail
        aside = (
            "; if it was the store and is damaged, move it aside: the spools still hold the "
            "records, and a `gangway lineage sync` builds it again"
            if damaged
            else ""
        )
        return (
            f"{uri} is not an MLflow store ({state.detail or 'no MLflow tables'}); check the "
            f"path — Gangway does not add tables to another database{aside}"
        )
    if state.detail:  # a hot journal: only a writer may roll it back
        return (
            f"{uri}: {state.detail}; reading never changes a store — a `gangway lineage "
            "sync` into it (or a local run recording to it) recovers it"
        )
    if state.condition == "unknown":
        return (
            f"{uri}: the MLflow store is at schema {state.revision}, which this MLflow "
            f"({state.expected}) does not know — a newer MLflow wrote it; read it with that "
            "MLflow, or record to another store"
        )
    missing = ", ".join(state.missing_tables[:3])
    if len(state.missing_tables) > 3:
        missing += f" and {len(state.missing_tables) - 3} more tables"
    what = (
        f"incomplete (missing {missing})"
        if state.condition == "incomplete"
        else f"at an older schema ({state.revision}; this MLflow writes {state.expected})"
    )
    if state.leftovers:
        what += f", and an interrupted migration left {', '.join(state.leftovers)}"
    if state.buildable:
        return (
            f"{uri}: the MLflow store is {what}; reading never changes a store — a "
            "`gangway lineage sync` into it (or a local run recording to it) completes it"
        )
    drop = f"drop {', '.join(state.leftovers)}, " if state.leftovers else ""
    return (
        f"{uri}: the MLflow store is {what} and holds {state.runs} run(s), so Gangway leaves "
        f"it as it is: back it up, {drop}then `mlflow db upgrade {uri}`"
    )


def _build(uri: str, path: Path, state: SqliteState) -> None:
    """Create, complete or repair the store (the caller holds the exclusive lock)."""
    new = state.condition in ("missing", "empty")
    if state.condition == "missing" and not os.access(path.parent, os.W_OK):
        raise _os_error(path, PermissionError(13, "directory not writable"))
    if not state.writable:
        raise PermanentError(_unusable(uri, state))
    try:
        _drop(path, state.leftovers)
        _initialize(uri)
    except Exception as e:
        if new:
            raise
        aside = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}")
        path.rename(aside)
        print(
            f"warning: {uri} was half-built and held no run, and could not be completed "
            f"({describe(e)}); set aside as {aside}, and created anew",
            file=sys.stderr,
        )
        _initialize(uri)
    else:
        if not new:
            print(f"note: completed the interrupted creation of {uri}", file=sys.stderr)


def _initialize(uri: str) -> None:
    """MLflow's own creation and migration of its tables, then its schema check."""
    import logging

    utils = db_utils()
    for name in ("alembic", "mlflow.store.db.utils"):  # its "creating tables" chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    engine = utils.create_sqlalchemy_engine_with_retry(uri)
    try:
        if not utils._all_tables_exist(engine):
            utils._initialize_tables(engine)  # the initial tables, then every migration
        else:
            utils._upgrade_db(engine)  # from wherever an interrupted migration stopped
        utils._verify_schema(engine)
    finally:
        engine.dispose()


def _drop(path: Path, tables: tuple[str, ...]) -> None:
    if not tables:
        return
    with contextlib.closing(sqlite3.connect(path)) as db:
        for t in tables:
            db.execute(f'drop table if exists "{t}"')
        db.commit()


@contextlib.contextmanager
def _lock(path: Path, *, shared: bool) -> Iterator[None]:
    """``path``'s lock file, held exclusively (a writer building the store) or shared (a
    reader). A reader never creates it: without one (a store no Gangway writer opened, a
    read-only directory) it reads unlocked."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        if not shared:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR if shared else os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if not shared:
            raise _os_error(path, e) from None
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _os_error(path: Path, e: OSError) -> PermanentError:
    return PermanentError(
        f"cannot create the MLflow store {path} ({e.strerror or e}); give a writable place "
        "(--state-dir, or -p mlflow-tracking-uri)"
    )


def _check_server(uri: str, timeout: float) -> None:
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout):
            return
    except urllib.error.HTTPError as e:
        if e.code == 404:  # an MLflow server serves /health: this is something else
            raise PermanentError(
                f"{uri} is not an MLflow tracking server (it answered /health with 404); "
                "check --tracking-uri or MLFLOW_TRACKING_URI"
            ) from None
        return  # it answered (an auth proxy, say); MLflow will say more
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise TransientError(
            f"cannot reach MLflow at {uri} ({reason}); is the server running? "
            "Check --tracking-uri or MLFLOW_TRACKING_URI"
        ) from None
