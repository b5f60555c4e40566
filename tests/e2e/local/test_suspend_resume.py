"""Local runs by the documented commands and storage: `gangway run` waiting at a suspend step
for `gangway resume`, and artifacts under a run's ``storage-root`` on file:// and s3://."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import tests.argo_features as features
from tests.helpers import REPO
from tests.helpers.runs import Run, describe, node


def test_gangway_resume_lets_a_suspended_cli_run_go_on(tmp_path: Path) -> None:
    """The documented commands: `gangway run` waits at the suspend step; `gangway resume
    WORKFLOW` from another terminal lets it go on; a typo'd name is an error naming the runs."""
    import subprocess
    import sys
    import time

    repo = REPO
    gangway = [sys.executable, "-c", "from gangway.cli import main; main()"]
    state = tmp_path / "state"
    run_cmd = [*gangway, "run", str(repo / "tests/argo_features/suspend_manual.py")]
    proc = subprocess.Popen(
        [*run_cmd, "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list((state / "runs").glob("*/logs/*before*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        (name,) = [p.name for p in (state / "runs").iterdir()]
        time.sleep(1)
        assert proc.poll() is None, "the run must wait at its suspend step"
        typo = subprocess.run(
            [*gangway, "resume", name + "x", "--state-dir", str(state)],
            capture_output=True,
            text=True,
        )
        assert typo.returncode != 0 and "no local run named" in typo.stderr + typo.stdout
        assert "Traceback" not in typo.stderr
        ok = subprocess.run(
            [*gangway, "resume", name, "--state-dir", str(state)], capture_output=True, text=True
        )
        assert ok.returncode == 0, ok.stderr
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "Succeeded" in out and "approve" in out


def test_artifacts_live_under_the_runs_storage_root(root_uri: str, tmp_path: Path) -> None:
    """With a ``storage-root`` (file:// or s3://, a real S3 API here), the local artifact
    repository is ``STORAGE_ROOT/artifacts``: a tar+gzip file and a published directory, each
    read back by the next step."""
    from gangway.local.session import run_pipeline

    path = Path(features.__file__).parent / "artifacts_storage_root.py"
    res = run_pipeline(path, {"storage-root": root_uri}, tmp_path / "state", parallelism=2).result
    assert res.phase == "Succeeded", describe(cast(Run, res))
    made = node(cast(Run, res), "make").artifacts
    assert made["file"] == f"{root_uri}/artifacts/{res.name}/make/attempt-1/file.tgz"
    assert made["tree"] == f"{root_uri}/artifacts/{res.name}/make/attempt-1/tree/"
    assert node(cast(Run, res), "read").result == "one two "
