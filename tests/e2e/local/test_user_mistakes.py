"""Every user mistake ends in one clear line that names what to fix — no traceback, no wrong
exit code, no silent success. One scenario per mistake, each reproduced as a user makes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components import checkpoints
from components.evaluation import evaluate
from gangway import storage
from gangway.errors import PermanentError
from gangway.lineage.records import StepRecord, WorkflowInfo
from gangway.lineage.spool import Spool
from gangway.step.main import error_summary
from tests.helpers import REPO, Output, gangway

PIPELINE = "pipelines/train_eval_infer.py"


def _one_clear_line(res: Output, *words: str, code: int = 1) -> None:
    assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Traceback" not in res.stdout + res.stderr
    assert 'File "' not in res.stdout + res.stderr
    for w in words:
        assert w in res.stdout + res.stderr, res.stdout[-2000:] + res.stderr[-2000:]


def test_misspelt_step_module_is_a_compile_error(tmp_path: Path) -> None:
    src = (
        (REPO / PIPELINE)
        .read_text()
        .replace("from typing", "from dataclasses import replace\nfrom typing", 1)
        .replace("    train = TRAIN(", '    train = replace(TRAIN, module="components.trainin")(')
    )
    assert "components.trainin" in src
    typo = tmp_path / "typo.py"
    typo.write_text(src)
    for args in (["compile"], ["run", "--state-dir", str(tmp_path / "s")]):
        res = gangway(*args, str(typo))
        _one_clear_line(res, "step 'train'", "did you mean 'components.training'?")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("0", "must be a whole number from 1 to 256 (got '0')", id="zero-nodes"),
        pytest.param("-1", "must be a whole number from 1 to 256", id="negative-nodes"),
        pytest.param("2.5", "must be a whole number", id="fractional-nodes"),
    ],
)
def test_bad_gang_size_is_refused_before_running(tmp_path: Path, value: str, message: str) -> None:
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", f"nodes={value}")
    _one_clear_line(res, "-p nodes: ", message, "nothing was run")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--nproc-per-node=0"], "--nproc-per-node='0'", id="zero-procs"),
        pytest.param(["--nproc-per-node=abc"], "--nproc-per-node='abc'", id="word-procs"),
        pytest.param(["--nnodes=0"], "--nnodes='0'", id="zero-pods"),
    ],
)
def test_gang_settings_inside_the_launcher_are_permanent(args: list[str], message: str) -> None:
    """torchrun would assert, which used to read as a lost peer (75) and restart the gang."""
    res = subprocess.run(
        [sys.executable, "-m", "gangway.step.launch", *args, "-m", "components.training"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    _one_clear_line(res, "gang settings are invalid", message)


def test_quote_in_a_value_is_one_line_not_a_yaml_traceback(tmp_path: Path) -> None:
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", "model=ti'ny")
    _one_clear_line(res, "-p model: ", "must be one of tiny, small — did you mean tiny?")


def test_non_integer_train_steps_is_refused_before_staging_runs(tmp_path: Path) -> None:
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", "train-steps=abc")
    _one_clear_line(res, "-p train-steps: must be a whole number, at least 1 (got 'abc')")
    assert "nothing was run" in res.stderr and not list(tmp_path.glob("runs/*/logs"))


def test_error_summary_keeps_the_items_and_drops_a_following_traceback() -> None:
    log = [
        "error: training config is invalid:",
        "  steps: Input should be a valid integer (got 'abc')",
        "fix these settings and re-run",
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
    ]
    assert error_summary(log) == (
        "error: training config is invalid: steps: Input should be a valid integer (got 'abc')"
    )
    assert error_summary(["error: training config is invalid:", '  File "x", line 1']) == (
        "error: training config is invalid:"
    )


def test_ls_on_nothing_fails_and_on_a_file_lists_it(tmp_path: Path) -> None:
    _one_clear_line(gangway("ls", str(tmp_path / "missing")), "nothing there")
    (tmp_path / "f.txt").write_text("hello")
    res = gangway("ls", str(tmp_path / "f.txt"))
    assert res.returncode == 0, res.stderr
    assert "1 object, 5 B; no manifest" in res.stdout


def test_lineage_reading_never_creates_a_store(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    res = gangway("lineage", "workflow:x", "--tracking-uri", f"sqlite:///{db}")
    _one_clear_line(res, "no MLflow store there")
    assert not db.exists()


def test_lineage_against_an_unreachable_server_fails_in_seconds() -> None:
    t0 = time.monotonic()
    res = gangway("lineage", "workflow:x", "--tracking-uri", "http://127.0.0.1:9")
    _one_clear_line(res, "cannot reach MLflow at http://127.0.0.1:9", code=75)
    assert time.monotonic() - t0 < 20


def test_lineage_without_a_store_says_where_it_looked(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    res = gangway("lineage", "workflow:x", cwd=tmp_path, env=env)
    _one_clear_line(res, "none in .gangway", "--tracking-uri")


def test_spool_record_missing_fields_is_reported_not_defaulted(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path / "spool"))
    good = StepRecord(workflow=WorkflowInfo(pipeline="p", name="w", uid="u"), step="stage")
    spool.write(good)
    (tmp_path / "spool" / "0000000000001-stage-bad.json").write_text('{"step": "stage"}')
    (tmp_path / "spool" / "0000000000002-stage-junk.json").write_text("[1, 2")
    assert [r.key for r, _ in spool.records()] == [good.key]
    assert sorted(Path(u).name for u in spool.bad) == [
        "0000000000001-stage-bad.json",
        "0000000000002-stage-junk.json",
    ]
    assert "missing field(s) key, rev, start_ms, status, version, workflow" in str(spool.bad)
    res = gangway(
        "lineage",
        "sync",
        "--spool",
        str(tmp_path / "spool"),
        "--tracking-uri",
        f"sqlite:///{tmp_path}/mlflow.db",
    )
    _one_clear_line(res, "2 spooled record(s) are unreadable", "sent 1 record(s)")


def test_one_corrupt_checkpoint_is_skipped_by_name(
    corpus_uri: str, trained: str, tmp_path: Path
) -> None:
    import shutil

    root = tmp_path / "ck"
    shutil.copytree(storage.parse(trained).path, root)
    uris = [c.uri for c in checkpoints.complete(f"file://{root}")]
    bad = storage.parse(uris[1]).path
    victim = next(p for p in sorted(bad.iterdir()) if p.suffix == ".distcp")
    victim.write_bytes(b"\0" * victim.stat().st_size)
    m = evaluate(corpus_uri, uris, max_tokens=4096, cache_dir=tmp_path / "cache")
    assert [r["step"] for r in m["checkpoints"]] == [10, 30]
    assert [u["uri"] for u in m["unusable"]] == [uris[1]]
    assert "not matching the manifest's sha256" in m["unusable"][0]["error"]
    for uri in (uris[0], uris[2]):
        victim = next(p for p in sorted(storage.parse(uri).path.iterdir()) if p.suffix == ".distcp")
        victim.write_bytes(b"\0")
    with pytest.raises(PermanentError, match="none of the 3 checkpoint"):
        evaluate(corpus_uri, uris, max_tokens=4096, cache_dir=tmp_path / "cache2")
    metrics = json.dumps(m)
    assert "step-00000020" in metrics


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        pytest.param("run.json", b"\xff\xfe", "Invalid JSON", id="run-not-utf8"),
        pytest.param("run.json", b'{"workflow": "x", "pipeline": "p"}', "workflow", id="run-shape"),
        pytest.param(
            "run.json", b'{"workflow": {}, "pipeline": "p"}', "needs a name and a uid", id="no-uid"
        ),
        pytest.param("nodes.json", b'{"phase": "Failed", "nodes": "x"}', "nodes", id="nodes-shape"),
        pytest.param("nodes.json", b'{"phase": "Failed", "nodes": [{}]}', "name", id="node-fields"),
    ],
)
def test_retry_of_a_damaged_run_record_says_which_file(
    tmp_path: Path, file: str, content: bytes, message: str
) -> None:
    from gangway.local.runs import prepare_run
    from gangway.local.state import save_nodes

    run = prepare_run(REPO / PIPELINE, {}, tmp_path)
    save_nodes(tmp_path, run.name, [], "Failed")
    (tmp_path / "runs" / run.name / file).write_bytes(content)
    res = gangway("retry", "--state-dir", str(tmp_path))
    _one_clear_line(res, f"{file}: unreadable run state", message, "cannot be retried")


def test_a_second_run_of_the_same_workflow_is_refused_and_leftovers_are_killed(
    tmp_path: Path,
) -> None:
    """The lock is the kernel's (gone with its process); what a killed gangway left running
    (found by the uid in GANGWAY_PROC) is killed before a retry starts."""
    from gangway.local._processes import PROC_ENV
    from gangway.local.runs import hold, prepare_run

    run = prepare_run(REPO / PIPELINE, {}, tmp_path)
    orphan = subprocess.Popen(
        ["sleep", "300"], env={**os.environ, PROC_ENV: f"{run.saved.uid}.abc123.1"}
    )
    # Between fork and exec the child still shows the parent's environment: wait for its own.
    environ = Path(f"/proc/{orphan.pid}/environ")
    deadline = time.monotonic() + 10
    while PROC_ENV.encode() not in environ.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        with hold(run) as leftovers:
            assert leftovers == [orphan.pid]
            assert orphan.wait(timeout=10) == -9
            busy = pytest.raises(PermanentError, match=f"{run.name} is already running here")
            with busy, hold(run):
                pass
        with hold(run) as again:  # released
            assert again == []
    finally:
        orphan.kill()


def test_relative_locations_are_made_absolute_once(tmp_path: Path) -> None:
    """Each step runs in its own scratch directory: a relative storage root or sqlite store
    would name a different place in each (and did)."""
    from gangway.local.runs import absolute_locations

    got = absolute_locations(
        {"storage-root": "rel/store", "mlflow-tracking-uri": "sqlite:///rel.db", "x": "y"}
    )
    assert got["storage-root"] == f"file://{Path.cwd()}/rel/store"
    assert got["mlflow-tracking-uri"] == f"sqlite:///{Path.cwd()}/rel.db"
    assert got["x"] == "y"
    with pytest.raises(PermanentError, match="-p storage-root: 'file:/x': a URI needs '://'"):
        absolute_locations({"storage-root": "file:/x"})


def test_a_percent_in_the_state_dir_stays_literal_for_mlflow(tmp_path: Path) -> None:
    from gangway.lineage import sqlite_path
    from gangway.local.runs import local_defaults

    uri = local_defaults(tmp_path / "pct%20x", {"mlflow-tracking-uri"})["mlflow-tracking-uri"]
    assert uri.endswith("/pct%2520x/mlflow.db")
    assert sqlite_path(uri) == tmp_path / "pct%20x" / "mlflow.db"


def test_lineage_never_writes_into_a_database_that_is_not_mlflow(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table notes(x)")
    before = db.read_bytes()
    res = gangway("lineage", "model:x/1", "--tracking-uri", f"sqlite:///{db}")
    _one_clear_line(res, "is not an MLflow store")
    assert db.read_bytes() == before


def test_ls_skips_dangling_links_and_names_a_bad_endpoint(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.txt").write_text("a")
    (tmp_path / "d" / "sub" / "dangling").symlink_to(tmp_path / "nowhere")
    res = gangway("ls", str(tmp_path / "d"))
    assert res.returncode == 0, res.stderr
    assert "a.txt" in res.stdout and "dangling" not in res.stdout
    env = {**os.environ, "AWS_ENDPOINT_URL": "not-a-url", "AWS_ACCESS_KEY_ID": "x"}
    env["AWS_SECRET_ACCESS_KEY"] = "y"
    _one_clear_line(gangway("ls", "s3://my-bucket/x", env=env), "check AWS_ENDPOINT_URL")


def _recorded(state_dir: Path, name: str, phase: str, created: float) -> None:
    """A run recorded in ``state_dir`` as ``gangway run`` leaves it, ended in ``phase``."""
    from gangway.local.state import SavedRun, save_nodes, save_run

    meta = {"name": name, "uid": f"uid-{name}"}
    save_run(state_dir, SavedRun({"metadata": meta}, "p.py", created=created))
    save_nodes(state_dir, name, [], phase)


@pytest.mark.parametrize(
    ("runs", "ref", "message"),
    [
        pytest.param(
            [("demo", "wf-old", "Succeeded"), ("demo", "wf-new", "Failed")],
            None,
            ".gangway/demo has wf-new (Failed): `gangway retry --state-dir .gangway/demo`",
            id="newest-below-failed",
        ),
        pytest.param(
            [("demo", "wf-old", "Failed"), ("demo", "wf-new", "Succeeded")],
            None,
            "has wf-old (Failed): `gangway retry wf-old --state-dir .gangway/demo`",
            id="older-below-failed-newest-succeeded",
        ),
        pytest.param(
            [("demo", "wf-a", "Failed"), ("nb", "wf-b", "Running")],
            None,
            ".gangway/nb has wf-b (Running): `gangway retry --state-dir .gangway/nb`",
            id="newest-of-two-state-dirs",
        ),
        pytest.param(
            [("demo", "wf-a", "Succeeded"), ("demo", "wf-b", "Succeeded")],
            None,
            "every run below it succeeded (newest: wf-b in .gangway/demo): nothing to retry",
            id="everything-below-succeeded",
        ),
        pytest.param(
            [("demo", "wf-a", "Failed"), ("demo", "wf-b", "Failed")],
            "wf-a",
            "has wf-a (Failed): `gangway retry wf-a --state-dir .gangway/demo`",
            id="named-run-below",
        ),
        pytest.param(
            [("demo", "wf-a", "Failed")],
            "wf-x",
            "no local runs in .gangway: start one with `gangway run PIPELINE --state-dir .gangway`",
            id="named-run-nowhere",
        ),
    ],
)
def test_retry_in_the_default_state_dir_names_the_one_below_that_has_the_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    runs: list[tuple[str, str, str]],
    ref: str | None,
    message: str,
) -> None:
    """`make demo` runs with --state-dir .gangway/demo and `gangway retry` defaults to
    .gangway: the error names the state directory and the exact command, and nothing runs
    from there in its place (its storage, logs and MLflow store are its own)."""
    from gangway.errors import NotFoundError
    from gangway.local.state import find_run

    monkeypatch.chdir(tmp_path)
    for created, (sub, name, phase) in enumerate(runs):
        _recorded(Path(".gangway") / sub, name, phase, created=1000.0 + created)
    with pytest.raises(NotFoundError) as got:
        find_run(Path(".gangway"), ref)
    assert message in str(got.value)
    assert str(got.value).startswith("no local runs in .gangway")


def test_bare_retry_after_make_demo_names_its_state_dir(tmp_path: Path) -> None:
    """The user's own steps: `make demo`, the run interrupted, then a bare `gangway retry`;
    the command it names finds the run."""
    from gangway.local.state import find_run

    _recorded(tmp_path / ".gangway" / "demo", "train-eval-infer-99d0aa", "Failed", time.time())
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    res = gangway("retry", cwd=tmp_path)
    _one_clear_line(
        res,
        "no local runs in .gangway; .gangway/demo has train-eval-infer-99d0aa (Failed)",
        "`gangway retry --state-dir .gangway/demo` retries it there",
    )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert find_run(tmp_path / ".gangway" / "demo", None).name == "train-eval-infer-99d0aa"


def test_resume_of_a_run_in_the_state_dir_below_names_it(tmp_path: Path) -> None:
    """`gangway resume NAME` after `make demo` (which runs in .gangway/demo) says where the
    run is, with the command, instead of only 'no local run named'."""
    from gangway.errors import NotFoundError
    from gangway.local._suspend import resume

    _recorded(tmp_path / ".gangway" / "demo", "wf-waiting", "Running", time.time())
    with pytest.raises(NotFoundError) as e:
        resume(tmp_path / ".gangway", "wf-waiting")
    assert f"it is in {tmp_path}/.gangway/demo: `gangway resume wf-waiting --state-dir" in str(
        e.value
    )


@pytest.mark.parametrize(
    ("where", "says"),
    [
        pytest.param("afile/wt.yaml", "afile is a file, not a directory", id="parent-is-a-file"),
        pytest.param("ro/wt.yaml", "ro is not writable; give a directory you can", id="read-only"),
        pytest.param("ro", "not a regular file; give a file path", id="a-directory"),
        pytest.param("", "-o: give a file path", id="empty-path"),
    ],
)
def test_compile_output_that_cannot_be_written_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, says: str
) -> None:
    """`compile -o` used to end in a FileNotFoundError, NotADirectoryError or PermissionError
    traceback; now one line names the path and what to do, before compiling."""
    from typer.testing import CliRunner

    from gangway.cli import app

    (tmp_path / "afile").write_text("")
    (tmp_path / "ro").mkdir()
    real_access = os.access  # root writes anywhere: the check is what is under test
    read_only = tmp_path / "ro"
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode: not (mode & os.W_OK and Path(p) == read_only) and real_access(p, mode),
    )
    out = str(tmp_path / where) if where else ""
    res = CliRunner().invoke(app, ["compile", PIPELINE, "-o", out])
    assert isinstance(res.exception, PermanentError), res.output
    assert str(res.exception).startswith("-o") and says in str(res.exception)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile", "ro"]


def test_compile_output_into_a_missing_directory_makes_it(tmp_path: Path) -> None:
    """`-o out/wt.yaml` makes out/, as `mkdir -p` would; the file is what stdout gets."""
    from typer.testing import CliRunner

    from gangway.cli import app

    target = tmp_path / "out" / "nested" / "wt.yaml"
    res = CliRunner().invoke(app, ["compile", PIPELINE, "-o", str(target)])
    assert res.exit_code == 0, res.output
    assert res.output == f"wrote {target}\n"
    assert target.read_text() == CliRunner().invoke(app, ["compile", PIPELINE]).output
    assert [p.name for p in target.parent.iterdir()] == ["wt.yaml"]  # no temporary left


def test_compile_into_a_file_as_directory_prints_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    res = gangway("compile", PIPELINE, "-o", str(tmp_path / "afile" / "wt.yaml"))
    _one_clear_line(res, f"error: -o {tmp_path}/afile/wt.yaml: {tmp_path}/afile is a file")
    assert res.stderr.count("\n") == 1 and res.stdout == ""
