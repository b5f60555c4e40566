"""What a sqlite tracking store holds, read without changing it: its condition (missing,
complete, half-built, at another schema, not MLflow's at all), which store it is, and whether
a killed writer left a hot journal. :mod:`gangway.lineage.store` decides from this what a
reader or a writer may do."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

__all__ = [
    "Condition",
    "SqliteState",
    "db_utils",
    "hot_journal",
    "inspect_sqlite",
    "instance",
    "mlflow_schema",
    "sqlite_path",
    "sqlite_uri",
]

_TMP_PREFIX = "_alembic_tmp_"
_CORE = frozenset({"alembic_version", "experiments", "runs"})

Condition = Literal["missing", "empty", "foreign", "current", "incomplete", "outdated", "unknown"]
"""``incomplete``: tables missing; ``outdated``: an older schema of this MLflow's; ``unknown``:
a schema this MLflow does not know (a newer MLflow wrote it)."""


def sqlite_uri(path: Path) -> str:
    """The MLflow tracking URI of a local sqlite store. SQLAlchemy percent-decodes the path,
    so it is percent-encoded here: a ``%``, ``?`` or ``#`` in a directory name stays literal."""
    return "sqlite:///" + quote(str(path), safe="/")


def sqlite_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///`` tracking URI (relative when it has three slashes; any
    driver, ``sqlite+pysqlite:///``, names a file the same way)."""
    m = re.match(r"sqlite(\+\w+)?:///", uri)
    if m is None:
        return None
    return Path(unquote(uri[m.end() :].split("?", 1)[0]))


@dataclass(frozen=True)
class SqliteState:
    """What a sqlite file holds, read without changing it."""

    condition: Condition
    revision: str | None = None
    """The store's schema revision (alembic), when it has one."""
    expected: str = ""
    """The revision this MLflow writes."""
    missing_tables: tuple[str, ...] = ()
    leftovers: tuple[str, ...] = ()
    """Temporary tables an interrupted migration left behind."""
    runs: int = 0
    detail: str = ""
    """Why a foreign file is not an MLflow store."""

    @property
    def buildable(self) -> bool:
        """Whether Gangway may build it on its own: incomplete or outdated, holding no run
        (a creation interrupted, or a race lost) — a store with runs is the user's to migrate."""
        return self.condition in ("incomplete", "outdated") and not self.runs

    @property
    def writable(self) -> bool:
        """Whether a writer can use it: as it is, or once built (missing, empty, buildable)."""
        return self.condition in ("missing", "empty", "current") or self.buildable


def instance(uri: str) -> str:
    """Which store is at ``uri`` now: for sqlite, when its Default experiment was made (one per
    store, set when the store was built); "" for a server, or a file that holds none."""
    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return ""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            row = db.execute(
                "select creation_time from experiments where experiment_id = 0"
            ).fetchone()
    except sqlite3.Error:
        return ""
    return str(row[0]) if row and row[0] is not None else ""


def hot_journal(path: Path) -> bool:
    journal = path.with_name(path.name + "-journal")
    return journal.is_file() and journal.stat().st_size > 0


def inspect_sqlite(path: Path) -> SqliteState:
    """The state of the sqlite file at ``path``, opened read-only."""
    if not path.exists():
        return SqliteState("missing")
    if not path.is_file():
        return SqliteState("foreign", detail="a directory, not a file")
    if hot_journal(path):
        return SqliteState(
            "incomplete",
            detail=f"an interrupted write left {path.name}-journal; a writer rolls it back",
        )
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            names = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
            revision = None
            if "alembic_version" in names:
                row = db.execute("select version_num from alembic_version").fetchone()
                revision = row[0] if row else None
            runs = db.execute("select count(*) from runs").fetchone()[0] if "runs" in names else 0
    except sqlite3.DatabaseError as e:
        return SqliteState("foreign", detail=f"not a SQLite database, or a damaged one: {e}")
    leftovers = tuple(sorted(n for n in names if n.startswith(_TMP_PREFIX)))
    if not names:
        return SqliteState("empty")
    if not (_CORE & names) and not leftovers:
        return SqliteState("foreign", detail="no MLflow tables")
    expected_tables, history = mlflow_schema()
    head = history[0]
    missing = tuple(sorted(expected_tables - names))
    condition: Condition = "current"
    if revision is not None and revision not in history:
        condition = "unknown"
    elif missing or revision is None:
        condition = "incomplete"
    elif revision != head:
        condition = "outdated"
    return SqliteState(condition, revision, head, missing, leftovers, int(runs))


def mlflow_schema() -> tuple[frozenset[str], list[str]]:
    """The tables of the MLflow installed here, and its schema revisions, newest first."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.base_sql_model import Base

    script = ScriptDirectory.from_config(db_utils()._get_alembic_config(db_url=""))
    return frozenset(Base.metadata.tables), [r.revision for r in script.walk_revisions()]


def db_utils() -> Any:
    """MLflow's own store creation, migration and schema check (mlflow is pinned: these
    private helpers are what its ``SqlAlchemyStore`` runs on first use)."""
    import importlib

    return importlib.import_module("mlflow.store.db.utils")
