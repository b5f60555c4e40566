"""Lean tracked steps: in a pipeline a step only spools its lineage; ``gangway run``, the exit
handler and ``gangway lineage sync --follow`` send it — against a real MLflow server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from gangway.lineage.follow import follow_pass
from gangway.lineage.links import record_link
from gangway.lineage.spool import Spool
from gangway.step.tracking import StepTracker
from tests.helpers import REPO

SESSION = uuid.uuid4().hex[:8]


def _env(uri: str, root: Path, uid: str, step: str = "s", ns: str = "team-a") -> dict[str, str]:
    uid = f"{uid}-{SESSION}"
    return {
        "GANGWAY_LINEAGE_SPOOL": str(root / uid / "lineage"),
        "GANGWAY_LINEAGE_REPLAY": "later",
        "MLFLOW_TRACKING_URI": uri,
        "GANGWAY_PIPELINE": "p-lean",
        "GANGWAY_WORKFLOW_NAME": f"wf-{uid}",
        "GANGWAY_WORKFLOW_UID": uid,
        "GANGWAY_NAMESPACE": ns,
        "GANGWAY_STEP": step,
    }


def _runs_of(uri: str, uid: str) -> list[object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("p-lean")
    if exp is None:
        return []
    return list(client.search_runs([exp.experiment_id], f"tags.gangway.workflow_uid = '{uid}'"))


def test_a_pipeline_step_only_spools_and_never_imports_mlflow(
    mlflow_server: str, tmp_path: Path
) -> None:
    """The step process spools, writes a search link by its key and exits without MLflow;
    a sync pass then creates the run that link finds."""
    env = {**os.environ, **_env(mlflow_server, tmp_path, "u1")}
    env["GANGWAY_OUTPUTS"] = str(tmp_path / "out")
    code = (
        "import sys\nfrom gangway.step.tracking import StepTracker\n"
        "with StepTracker() as t:\n    t.log_metric('loss', 1.5, 3)\n"
        "print('mlflow' in sys.modules)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert res.stdout.strip() == "False", res.stderr
    uid = env["GANGWAY_WORKFLOW_UID"]
    assert _runs_of(mlflow_server, uid) == []  # nothing sent by the step itself
    link = (tmp_path / "out" / "mlflow_run_url").read_text()
    assert link.startswith(f"{mlflow_server}/#/experiments/")
    done: set[str] = set()
    sent = follow_pass([str(tmp_path)], mlflow_server, namespace="team-a", done=done)
    assert (sent.spools, sent.sent, sent.pending) == (1, 1, 0)
    from mlflow.tracking import MlflowClient

    path, query = link.split("#", 1)[1].split("?searchFilter=")
    exp = path.split("/")[2]
    (hit,) = MlflowClient(tracking_uri=mlflow_server).search_runs([exp], unquote(query))
    assert hit.data.metrics["loss"] == 1.5
    assert done == set()  # the workflow has not ended: the spool is looked at again


def test_a_pass_skips_other_namespaces_and_ended_workflows(
    mlflow_server: str, tmp_path: Path
) -> None:
    from gangway.lineage.records import workflow_from_env
    from gangway.step.tracking import record_workflow

    mine, theirs = _env(mlflow_server, tmp_path, "u2"), _env(mlflow_server, tmp_path, "u3", ns="b")
    for env in (mine, theirs):
        with StepTracker(env=env):
            pass
    done: set[str] = set()
    first = follow_pass([str(tmp_path)], mlflow_server, namespace="team-a", done=done)
    assert (first.spools, first.sent) == (1, 1)
    assert _runs_of(mlflow_server, theirs["GANGWAY_WORKFLOW_UID"]) == []
    wf = workflow_from_env(mine)
    record_workflow(mlflow_server, wf, "FINISHED", mine["GANGWAY_LINEAGE_SPOOL"], phase="Succeeded")
    follow_pass([str(tmp_path)], mlflow_server, namespace="team-a", done=done)
    assert done == {mine["GANGWAY_LINEAGE_SPOOL"]}  # ended and complete: skipped from now on
    again = follow_pass([str(tmp_path)], mlflow_server, namespace="team-a", done=done)
    assert (again.spools, again.sent) == (0, 0)


def test_sync_follow_sends_new_records_until_stopped(mlflow_server: str, tmp_path: Path) -> None:
    """`gangway lineage sync --follow` picks up a record spooled after it started, and a
    SIGTERM stops it cleanly (exit 0)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gangway.cli import main; main()",
            "lineage",
            "sync",
            "--follow",
            "--interval",
            "0.5",
            "--spool",
            f"file://{tmp_path}",
            "--namespace",
            "team-a",
            "--tracking-uri",
            mlflow_server,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # started with no spool at all: it waits, it does not fail
        assert proc.poll() is None
        env = _env(mlflow_server, tmp_path, "u4")
        with StepTracker(env=env) as t:
            t.log_metric("acc", 0.5)
        deadline = time.monotonic() + 60
        while not _runs_of(mlflow_server, env["GANGWAY_WORKFLOW_UID"]):
            assert time.monotonic() < deadline, "the follower never sent the record"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "sent 1 record(s)" in out and out.rstrip().endswith("stopped"), out


def test_a_link_to_an_unreachable_server_is_empty_and_quick() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    assert record_link(f"http://127.0.0.1:{port}", "p", "k") == ""
    assert time.monotonic() - t0 < 3
    assert record_link("sqlite:///x.db", "p", "k") == "tags.`gangway.record` = 'k'"


def test_a_link_to_a_server_is_its_ui_searching_the_records_run(mlflow_server: str) -> None:
    """A step's link, made before its run exists: the MLflow UI's page of the pipeline's
    experiment (made now, through the REST API) searched by the step's record key."""
    from urllib.parse import unquote

    from mlflow.tracking import MlflowClient

    link = record_link(mlflow_server, "link-before-run", "k-123")
    path, query = link.removeprefix(f"{mlflow_server}/#").split("?searchFilter=")
    exp = MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name("link-before-run")
    assert exp is not None and path == f"/experiments/{exp.experiment_id}/runs"
    assert unquote(query) == "tags.`gangway.record` = 'k-123'"


def test_a_spooled_record_survives_for_later(tmp_path: Path) -> None:
    """MLflow down at the step's end loses nothing: the record is in the spool, unsent."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    env = _env("http://127.0.0.1:9", root, "u5")
    with StepTracker(env=env) as t:
        t.log_params({"lr": 0.1})
    (rec,) = Spool(env["GANGWAY_LINEAGE_SPOOL"]).pending("http://127.0.0.1:9")
    assert rec.key == t.record.key and rec.status == "FINISHED"
    assert json.loads(rec.to_bytes())["params"] == {"lr": "0.1"}


def test_the_exit_handler_closes_the_workflow_and_sends_the_rest(
    mlflow_server: str, tmp_path: Path, capsys: Any
) -> None:
    """`python -m gangway.lineage.close {{workflow.status}}` on a cluster: every spooled
    record is sent and the parent run is closed with the workflow's status."""
    from gangway.lineage.close import main

    env = _env(mlflow_server, tmp_path, "u6")
    with StepTracker(env=env):
        pass
    assert main(["Failed"], env) == 0
    assert "lineage complete: workflow run" in capsys.readouterr().out
    runs = _runs_of(mlflow_server, env["GANGWAY_WORKFLOW_UID"])
    status = {r.data.tags["gangway.kind"]: r.info.status for r in runs}  # type: ignore[attr-defined]
    assert status == {"workflow": "FAILED", "step": "FINISHED"}
    assert main(["Bogus"], env) == 0  # a wrong call is said, never a failed workflow
    assert "usage:" in capsys.readouterr().err
    assert main(["Succeeded"], {**env, "GANGWAY_LOCAL_RUN": "1"}) == 0
    assert "`gangway run` sends it" in capsys.readouterr().out
