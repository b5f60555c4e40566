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
from tests.helpers import GANGWAY, LoopbackProxy, Output, cli_process, gangway


def _one_clear_line(res: Output, *words: str, code: int = 1) -> None:
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

    from gangway.lineage.sqlite_state import db_utils as _db_utils
    from gangway.lineage.sqlite_state import mlflow_schema as _mlflow_schema

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
    """(In processes of their own: building the half-built store here loads MLflow's store
    for it into this process.)"""
    db = tmp_path / "mlflow.db"
    _half_built(db)
    state = inspect_sqlite(db)
    assert state.condition == "incomplete" and state.leftovers == ("_alembic_tmp_runs",)
    before = _digest(db)
    res = cli_process("lineage", "workflow:w0", "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "_alembic_tmp_runs", "reading never changes a store", "lineage sync")
    assert _digest(db) == before
    _spool(tmp_path / "spool", "w0")
    res = cli_process(
        "lineage", "sync", "--spool", str(tmp_path / "spool"), "--tracking-uri", sqlite_uri(db)
    )
    _one_clear_line(res, "completed the interrupted creation", "sent 1 record(s)", code=0)
    assert inspect_sqlite(db).condition == "current"
    res = cli_process("lineage", "workflow:w0", "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "workflow w0", code=0)


def test_a_store_with_runs_at_another_schema_is_left_as_it_is(tmp_path: Path) -> None:
    """Gangway migrates no store that holds runs: the user backs it up and upgrades it."""
    db = tmp_path / "mlflow.db"
    spool = _spool(tmp_path / "spool", "w0")
    res = gangway("lineage", "sync", "--spool", spool.root, "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "sent 1 record(s)", code=0)
    from gangway.lineage.sqlite_state import mlflow_schema as _mlflow_schema

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


def test_a_run_into_a_store_that_can_never_take_it_is_refused_before_it_runs(
    tracked: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / "mlflow.db") as conn:  # not MLflow's: never written into
        conn.execute("create table customers (id integer)")
    res = gangway("run", str(tracked), "--state-dir", str(state))
    _one_clear_line(
        res, "(parameter mlflow-tracking-uri)", "not an MLflow store", "nothing was run"
    )
    assert not (state / "runs").exists()
    res = gangway("run", str(tracked), "--state-dir", str(state), "-p", "mlflow-tracking-uri=x")
    _one_clear_line(res, "-p mlflow-tracking-uri=", "use sqlite:///PATH/mlflow.db")


def test_a_run_whose_store_is_down_fails_loudly_then_syncs_once_it_is_up(
    tracked: Path, tmp_path: Path, mlflow_server: str
) -> None:
    """A server that is down does not stop the work; the run says its lineage did not reach
    MLflow (exit 75) with the command that sends it, and that command does once it is up.
    (Down: a proxy in front of the suite's server, closed.)"""
    from mlflow.tracking import MlflowClient

    host, port = mlflow_server.removeprefix("http://").split(":")
    proxy = LoopbackProxy((host, int(port)))
    proxy.down()
    state = tmp_path / "state"
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    uri = proxy.url
    res = gangway(
        "run", str(tracked), "--state-dir", str(state), "-p", f"mlflow-tracking-uri={uri}", env=env
    )
    _one_clear_line(res, "Succeeded", "error: lineage not recorded", code=75)
    sync = next(line.strip() for line in res.stderr.splitlines() if "lineage sync" in line)
    assert sync.startswith("gangway lineage sync --spool ")
    proxy.up()
    try:
        res = gangway(*sync.split()[1:])
        _one_clear_line(res, "sent 1 record(s)", "0 still pending", code=0)
    finally:
        proxy.down()
    name = next((state / "runs").iterdir()).name
    found = MlflowClient(mlflow_server).search_runs(
        [e.experiment_id for e in MlflowClient(mlflow_server).search_experiments()],
        f"tags.`gangway.workflow` = '{name}'",
    )
    assert len(found) == 1


def test_a_sync_into_a_store_deleted_since_sends_everything_again(tmp_path: Path) -> None:
    """The marks said 'sent' for a store that no longer exists: a sync reported 0 pending and
        sent nothing. A sqlite store that is gone gets every record again. (Each sync a process of
    its own, as each is: one process keeps MLflow's store open for a URI.)"""
    db = tmp_path / "mlflow.db"
    spool = _spool(tmp_path / "spool", "w0", store=sqlite_uri(db))
    res = cli_process("lineage", "sync", "--spool", spool.root)
    _one_clear_line(res, "sent 1 record(s)", code=0)
    db.rename(tmp_path / "moved.db")
    res = cli_process("lineage", "sync", "--spool", spool.root)
    _one_clear_line(res, "sent 1 record(s)", "0 still pending", code=0)
    assert len(_runs(db)) == 2
    # Moved away again, and another store made at the same path before the sync (a later
    # run did): the marks are for the store that was there, so the record goes again.
    db.rename(tmp_path / "moved-again.db")
    other = _spool(tmp_path / "other", "w1", store=sqlite_uri(db))
    assert cli_process("lineage", "sync", "--spool", other.root).returncode == 0
    res = cli_process("lineage", "sync", "--spool", spool.root)
    _one_clear_line(res, "sent 1 record(s)", "0 still pending", code=0)
    assert len(_runs(db)) == 4
    res = cli_process("lineage", "sync", "--spool", spool.root)  # and once there, it is there
    _one_clear_line(res, "sent 0 record(s)", code=0)


def test_a_store_a_killed_writer_left_with_a_hot_journal_is_recovered(tmp_path: Path) -> None:
    """A writer killed mid-transaction leaves NAME-journal; read-only, the store looked like no
    MLflow store at all, for good. A writer rolls the journal back and goes on."""
    db = tmp_path / "mlflow.db"
    spool = _spool(tmp_path / "spool", "w0", store=sqlite_uri(db))
    assert gangway("lineage", "sync", "--spool", spool.root).returncode == 0
    pid = os.fork()
    if pid == 0:  # a writer that dies holding a write transaction: its journal stays
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("pragma journal_mode=delete")
        conn.execute("begin immediate")
        conn.execute("delete from runs")
        os._exit(0)
    os.waitpid(pid, 0)
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0
    res = gangway("lineage", "workflow:w0", "--tracking-uri", sqlite_uri(db))
    _one_clear_line(res, "an interrupted write left mlflow.db-journal")
    _spool(tmp_path / "spool", "w1", store=sqlite_uri(db))
    res = gangway("lineage", "sync", "--spool", spool.root)
    _one_clear_line(res, "sent 1 record(s)", code=0)
    assert len(_runs(db)) == 4  # nothing the killed writer did stays: w0's runs, and w1's


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        pytest.param("file:///tmp/gangway-mlruns", "MLflow's file store", id="file-store"),
        pytest.param("bogus://x", "unsupported scheme 'bogus'", id="unknown-scheme"),
        pytest.param("sqlite://", "an in-memory sqlite store keeps nothing", id="in-memory"),
    ],
)
def test_a_tracking_uri_mlflow_cannot_keep_runs_at_is_one_line_and_exit_1(
    tmp_path: Path, uri: str, says: str
) -> None:
    """Reading printed MLflow's traceback; a sync exited 75 ('try again')."""
    res = gangway("lineage", "workflow:x", "--tracking-uri", uri)
    _one_clear_line(res, says)
    spool = _spool(tmp_path / "spool", "w0", store=uri)
    for args in (["--tracking-uri", uri, "--other-store"], []):
        res = gangway("lineage", "sync", "--spool", spool.root, *args)
        _one_clear_line(res, says)


def test_a_read_through_a_driver_spelling_never_creates_a_store(tmp_path: Path) -> None:
    """`sqlite+pysqlite:///PATH` slipped past the checks, and MLflow built a store on a read."""
    uri = f"sqlite+pysqlite:///{tmp_path}/typo.db"
    res = gangway("lineage", "workflow:x", "--tracking-uri", uri)
    _one_clear_line(res, "no MLflow store there (no such file)")
    assert not (tmp_path / "typo.db").exists()
