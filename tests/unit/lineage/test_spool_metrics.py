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
