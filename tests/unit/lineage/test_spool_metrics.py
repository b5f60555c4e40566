"""``gangway lineage sync --follow --metrics-port``: the spool's pending records served for
Prometheus, stopped by SIGTERM like the follower itself."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import GANGWAY, REPO, cli


def _pending(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {
        s.labels.get("namespace", ""): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gangway_lineage_spool_pending_records"
    }


def test_the_follower_serves_its_pending_records(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    args = ["lineage", "sync", "--follow", "--spool", str(tmp_path), "--interval", "0.2"]
    proc = subprocess.Popen(
        [*GANGWAY, *args, "--namespace", "team-a", "--metrics-port", "0"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = ""
        while not line.startswith("metrics: ") and proc.poll() is None:
            line = proc.stdout.readline()
        url = line.split()[1].replace("0.0.0.0", "127.0.0.1")
        deadline = time.monotonic() + 8
        while not (found := _pending(url)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found == {"team-a": 0.0}
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0 and "stopped" in out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_metrics_port_goes_with_sync() -> None:
    ran = cli("lineage", "model:x/1", "--metrics-port", "9402")
    assert ran.returncode == 1 and "--metrics-port go with `gangway lineage sync`" in ran.stderr


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    """The follower with ``args``, and its /metrics URL (once it is serving)."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen(
        [*GANGWAY, "lineage", "sync", "--follow", "--metrics-port", "0", *args],
        cwd=REPO,
        env={**env, "COLUMNS": "80"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = ""
    while not line.startswith("metrics: ") and proc.poll() is None:
        line = proc.stdout.readline()
    return proc, line.split()[1].replace("0.0.0.0", "127.0.0.1")


def _samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("gangway_lineage_")
    }


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def test_a_spool_root_that_is_not_there_is_an_error_not_zero_pending(tmp_path: Path) -> None:
    """The follower cannot read a root that does not exist: it warns once (one line, however
    long, as a pod's log wants it), counts an error per pass, and serves no pending records
    and no good pass — never a healthy-looking 0."""
    root = tmp_path / ("a-long-directory-name-" * 4) / "runs"
    proc, url = _start("--spool", str(root), "--interval", "200ms", "--namespace", "team-a")
    try:
        errors = ("gangway_lineage_sync_errors_total", frozenset({("namespace", "team-a")}))
        deadline = time.monotonic() + 8
        while (found := _samples(url)).get(errors, 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found.get(errors, 0) >= 2, found
        assert set(found) == {errors}  # no pending, no last good pass
        err = _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (warning,) = [x for x in err.splitlines() if "does not exist" in x]
    assert f"spool root {root} does not exist" in warning  # one line, not wrapped at 80


def test_a_good_pass_is_served_and_without_namespace_no_label(tmp_path: Path) -> None:
    proc, url = _start("--spool", str(tmp_path), "--interval", "0.2")
    try:
        names = {
            "gangway_lineage_spool_pending_records",
            "gangway_lineage_sync_errors_total",
            "gangway_lineage_sync_last_pass_time_seconds",
        }
        deadline = time.monotonic() + 8
        while len(found := _samples(url)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(found) == {(n, frozenset()) for n in names}, found
        assert found[("gangway_lineage_spool_pending_records", frozenset())] == 0.0
        assert found[("gangway_lineage_sync_errors_total", frozenset())] == 0.0
        last = found[("gangway_lineage_sync_last_pass_time_seconds", frozenset())]
        assert abs(last - time.time()) < 30
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_metrics_port_without_follow_is_refused(tmp_path: Path) -> None:
    ran = cli("lineage", "sync", "--spool", str(tmp_path), "--metrics-port", "0")
    assert ran.returncode == 1
    assert ran.stderr.strip() == "error: --metrics-port goes with --follow"


def test_interval_takes_a_duration_or_seconds(tmp_path: Path) -> None:
    for bad in ("30x", "0", "2d"):
        ran = cli("lineage", "sync", "--follow", "--spool", str(tmp_path), "--interval", bad)
        (line,) = ran.stderr.strip().splitlines()
        assert ran.returncode == 1 and line.startswith(f"error: --interval '{bad}': "), line


def test_what_each_pass_does_to_the_follower_metrics() -> None:
    """A pass that could not list its roots (no credentials) counts an error and keeps the
    last known pending and good-pass time; one whose spools could not all be sent (MLflow
    down) counts an error but did read its roots."""
    from gangway.cli.lineage import _FollowerState
    from gangway.lineage.follow import PASS_ERROR, FollowPass

    s = _FollowerState().after(FollowPass(pending=3), 100.0)
    assert s == _FollowerState(pending=3, last_ok=100.0, errors=0)
    s = s.after(FollowPass(errors={PASS_ERROR: "no AWS credentials"}), 200.0)
    assert s == _FollowerState(pending=3, last_ok=100.0, errors=1)
    s = s.after(FollowPass(missing=["/nope"]), 250.0)
    assert s == _FollowerState(pending=3, last_ok=100.0, errors=2)
    s = s.after(FollowPass(pending=5, errors={"s3://b/runs/u/lineage": "MLflow down"}), 300.0)
    assert s == _FollowerState(pending=5, last_ok=300.0, errors=3)
