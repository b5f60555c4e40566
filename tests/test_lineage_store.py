"""The MLflow store lineage goes to, under concurrency and damage: a store built once under a
lock however many writers start at once, a half-built one completed, a read that never changes
a store, a sync that fails loudly and sends each spool to its own store — and a real
``gangway run`` whose store cannot be written, failing loudly, then synced once it works."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest

from gangway.lineage import sqlite_uri
from gangway.lineage.records import StepRecord, WorkflowInfo
from gangway.lineage.spool import Spool
from gangway.lineage.store import inspect_sqlite
from tests.test_cli import GANGWAY, gangway


def _one_clear_line(res: subprocess.CompletedProcess[str], *words: str, code: int = 1) -> None:
    out = res.stdout + res.stderr
    assert res.returncode == code, out[-3000:]
    assert "Traceback" not in out and 'File "' not in out, out[-3000:]
    for w in words:
        assert w in out, out[-3000:]


def _spool(root: Path, name: str, store: str = "") -> Spool:
    spool = Spool(str(root), store)
    wf = WorkflowInfo(pipeline="p", name=name, uid=f"uid-{name}")
    spool.write(StepRecord(workflow=wf, step="stage", status="FINISHED"))
    return spool


def _runs(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(r[0] for r in conn.execute("select name from runs"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _half_built(db: Path) -> None:
    """What two writers racing on a new store leave: the initial tables, the migrations run
    part of the way, and a migration's temporary table left behind."""
    from alembic import command
    from mlflow.store.tracking.dbmodels.initial_models import Base

    from gangway.lineage.store import _db_utils, _mlflow_schema

    utils = _db_utils()
    uri = sqlite_uri(db)
    history = _mlflow_schema()[1]
    engine = utils.create_sqlalchemy_engine_with_retry(uri)
    Base.metadata.create_all(engine)
    with engine.begin() as conn:
        config = utils._get_alembic_config(uri)
        config.attributes["connection"] = conn
        command.upgrade(config, history[len(history) // 2])
        conn.exec_driver_sql("create table _alembic_tmp_runs (x integer)")
    engine.dispose()


def test_concurrent_syncs_into_a_new_store_send_everything(tmp_path: Path) -> None:
    """Three syncs started at once into a store that does not exist yet: one builds it, the
    others wait for it; every record arrives, and the store is complete."""
    db = tmp_path / "mlflow.db"
    uri = sqlite_uri(db)
    procs = []
    for i in range(3):
        spool = _spool(tmp_path / f"spool{i}", f"w{i}")
        procs.append(
            subprocess.Popen(
                [*GANGWAY, "lineage", "sync", "--spool", spool.root, "--tracking-uri", uri],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=tmp_path,
            )
        )
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert all("sent 1 record(s)" in out and "0 still pending" in out for out in outs), outs
    assert inspect_sqlite(db).condition == "current"
    assert len(_runs(db)) == 6  # a step run and a parent run per workflow


def test_a_half_built_store_is_never_changed_by_a_read_and_completed_by_a_write(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mlflow.db"
    _half_built(db)
    state = inspect_sqlite(db)
    assert state.condition == "incomplete" and state.leftovers == ("_alembic_tmp_runs",)
    before = _digest(db)
    res = gangway("lineage", "workflow:w0", "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "_alembic_tmp_runs", "reading never changes a store", "lineage sync")
    assert _digest(db) == before
    _spool(tmp_path / "spool", "w0")
    res = gangway(
        "lineage", "sync", "--spool", str(tmp_path / "spool"), "--tracking-uri", sqlite_uri(db)
    )
    _one_clear_line(res, "completed the interrupted creation", "sent 1 record(s)", code=0)
    assert inspect_sqlite(db).condition == "current"
    res = gangway("lineage", "workflow:w0", "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "workflow w0", code=0)


def test_a_store_with_runs_at_another_schema_is_left_as_it_is(tmp_path: Path) -> None:
    """Gangway migrates no store that holds runs: the user backs it up and upgrades it."""
    db = tmp_path / "mlflow.db"
    spool = _spool(tmp_path / "spool", "w0")
    res = gangway("lineage", "sync", "--spool", spool.root, "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "sent 1 record(s)", code=0)
    from gangway.lineage.store import _mlflow_schema

    older = _mlflow_schema()[1][1]
    with sqlite3.connect(db) as conn:
        conn.execute("update alembic_version set version_num = ?", (older,))
    before = _digest(db)
    _spool(tmp_path / "spool", "w1")
    for args in (["workflow:w0"], ["sync", "--spool", spool.root]):
        res = gangway("lineage", *args, "--tracking-uri", sqlite_uri(db))
        _one_clear_line(res, f"at an older schema ({older}", "holds 2 run(s)", "mlflow db upgrade")
        assert _digest(db) == before


def test_a_sync_into_an_unusable_store_fails_and_keeps_every_record(tmp_path: Path) -> None:
    """'sent 0 record(s) … 0 still pending', exit 0, is gone: what is not sent is pending and
    the exit code says so."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("create table customers (id integer)")
    spool = _spool(tmp_path / "spool", "w0", store=sqlite_uri(other))
    res = gangway("lineage", "sync", "--spool", spool.root)
    _one_clear_line(res, "not an MLflow store", "1 record(s) stay spooled", "sent 0 record(s)")
    assert [r.key for r in spool.pending(sqlite_uri(other))] == [r.key for r, _ in spool.records()]


def test_a_sync_goes_to_the_spools_own_store_and_elsewhere_only_when_asked(
    tmp_path: Path,
) -> None:
    """A spool names its store: a sync without --tracking-uri sends it there (not into the
    demo's store beside it); into another store only with --other-store."""
    own, demo, other = (tmp_path / f"{n}.db" for n in ("own", "demo", "other"))
    (tmp_path / ".gangway" / "demo").mkdir(parents=True)
    _spool(tmp_path / "seed", "seed")
    seed = ["--spool", str(tmp_path / "seed")]
    assert gangway("lineage", "sync", *seed, "--tracking-uri", sqlite_uri(demo)).returncode == 0
    os.replace(demo, tmp_path / ".gangway" / "demo" / "mlflow.db")
    spool = _spool(tmp_path / "spool", "mine", store=sqlite_uri(own))
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    res = gangway("lineage", "sync", "--spool", spool.root, cwd=tmp_path, env=env)
    _one_clear_line(res, "sent 1 record(s)", code=0)
    assert len(_runs(own)) == 2
    assert len(_runs(tmp_path / ".gangway" / "demo" / "mlflow.db")) == 2  # the seed's only
    res = gangway("lineage", "sync", "--spool", spool.root, "--tracking-uri", sqlite_uri(other))
    _one_clear_line(res, f"its records are for {sqlite_uri(own)}", "--other-store")
    assert not other.exists()
    res = gangway(
        "lineage", "sync", "--spool", spool.root, "--tracking-uri", sqlite_uri(other),
        "--other-store",
    )  # fmt: skip
    _one_clear_line(res, "sent 1 record(s)", code=0)
    assert len(_runs(other)) == 2
    unmarked = _spool(tmp_path / "old", "old")
    res = gangway("lineage", "sync", "--spool", unmarked.root, cwd=tmp_path, env=env)
    _one_clear_line(res, "does not say which MLflow store", "--tracking-uri")


TRACKED = textwrap.dedent(
    """
    from hera.workflows import DAG, Container, Parameter, Task, Workflow

    with Workflow(
        name="tracked",
        entrypoint="main",
        arguments=[
            Parameter(name="storage-root", value=""),
            Parameter(name="mlflow-tracking-uri", value=""),
        ],
    ) as w:
        hello = Container(name="hello", image="python:3.11", command=["python", "-c", "1"])
        with DAG(name="main"):
            Task(name="hello", template=hello)
    """
)


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tracked") / "tracked.py"
    path.write_text(TRACKED)
    return path


def test_two_runs_started_at_once_in_a_fresh_state_dir_both_record(
    tracked: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    cmd = [*GANGWAY, "run", str(tracked), "--state-dir", str(state)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert not any("lineage not recorded" in out for out in outs), outs
    assert len(_runs(state / "mlflow.db")) == 2  # each workflow's parent run
    res = gangway(*cmd[len(GANGWAY) :])
    _one_clear_line(res, "Succeeded", code=0)
    assert len(_runs(state / "mlflow.db")) == 3


def test_a_run_whose_store_cannot_be_written_fails_loudly_then_syncs(
    tracked: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / "mlflow.db") as conn:  # not MLflow's: never written into
        conn.execute("create table customers (id integer)")
    res = gangway("run", str(tracked), "--state-dir", str(state))
    _one_clear_line(res, "Succeeded", "error: lineage not recorded", "not an MLflow store", code=75)
    sync = next(line.strip() for line in res.stderr.splitlines() if "lineage sync" in line)
    assert sync.startswith("gangway lineage sync --spool ")
    (state / "mlflow.db").unlink()  # the store fixed: the printed command sends it all
    res = gangway(*sync.split()[1:])
    _one_clear_line(res, "sent 1 record(s)", "0 still pending", code=0)
    assert len(_runs(state / "mlflow.db")) == 1
