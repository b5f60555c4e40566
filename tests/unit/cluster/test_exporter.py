"""The platform exporter: its loop (counters added up, a failed reading counted and the last
good values kept), its server scraped over HTTP, and `gangway exporter` — once, with bad flags,
and as a process serving a snapshot file that turns invalid mid-run, stopped by Ctrl-C."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gangway.cluster.exporter import Exporter, Families, Health, exposition, serve
from gangway.scheduling.fleet_samples import exporter_families
from gangway.scheduling.snapshot import EXAMPLE_SNAPSHOT
from gangway.step.metrics import MetricSpec
from tests.helpers import GANGWAY, REPO, cli

Values = dict[tuple[str, frozenset[tuple[str, str]]], float]
GAUGE = MetricSpec("t_free", "gauge", ("cluster",), "free", "test")
COUNTER = MetricSpec("t_seconds_total", "counter", ("team",), "seconds", "test")


def _values(text: str) -> Values:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _scrape(url: str) -> Values:
    with urllib.request.urlopen(url, timeout=5) as r:
        return _values(r.read().decode())


class FakeReads:
    """Readings in turn; an exception in the list is raised instead."""

    def __init__(self, *readings: int | Exception) -> None:
        self.readings = list(readings)

    def __call__(self) -> int:
        r = self.readings.pop(0)
        if isinstance(r, Exception):
            raise r
        return r


def _decide(free: int, before: int | None) -> Families:
    return [(GAUGE, [(("c1",), float(free))]), (COUNTER, [(("research",), 10.0)])]


def _own(last: int | None, h: Health) -> Families:
    return exporter_families(["c1"], errors=h.errors, last_ok=h.last_ok, duration=h.duration)


def test_counters_add_up_and_a_failed_reading_keeps_the_last_good_values() -> None:
    logged: list[str] = []
    reads = FakeReads(5, ValueError("bad yaml\nline 2"), 7)
    ex = Exporter(reads, _decide, _own, log=logged.append, now=lambda: 1000.0)
    assert ex.refresh() and not ex.refresh()
    v = _values(exposition(ex))
    assert v[("t_free", frozenset({("cluster", "c1")}))] == 5.0  # the last good value
    assert v[("t_seconds_total", frozenset({("team", "research")}))] == 10.0
    assert v[("gangway_exporter_snapshot_errors_total", frozenset({("cluster", "c1")}))] == 1.0
    assert v[("gangway_exporter_last_snapshot_time_seconds", frozenset({("cluster", "c1")}))] == (
        1000.0
    )
    (line,) = logged  # one line, the error's lines joined
    assert "snapshot not read (ValueError: bad yaml)" in line and "\n" not in line
    assert ex.refresh()
    v = _values(exposition(ex))
    assert v[("t_free", frozenset({("cluster", "c1")}))] == 7.0
    assert v[("t_seconds_total", frozenset({("team", "research")}))] == 20.0
    with pytest.raises(ValueError, match="strict"):
        Exporter(FakeReads(ValueError("strict")), _decide, _own).refresh(strict=True)


def test_the_server_answers_scrapes_with_the_latest_families() -> None:
    ex = Exporter(FakeReads(3, 4), _decide, _own, log=lambda _m: None)
    ex.refresh()
    port, server = serve(ex, 0, "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        assert _scrape(url)[("t_free", frozenset({("cluster", "c1")}))] == 3.0
        ex.refresh()
        assert _scrape(url)[("t_free", frozenset({("cluster", "c1")}))] == 4.0
    finally:
        server.shutdown()


def test_once_prints_the_example_fleet() -> None:
    ran = cli("exporter", "--snapshot", "example", "--once")
    assert ran.returncode == 0, ran.stderr
    v = _values(ran.stdout)

    def at(name: str, **labels: str) -> float:
        return v[(name, frozenset(labels.items()))]

    assert (
        at("gangway_queue_pending_gangs", cluster="us-east", queue="research", reason="preemption")
        == 1
    )
    assert at("gangway_queue_oldest_pending_seconds", cluster="us-east", queue="research") == 2700
    assert at("gangway_cluster_free_gpus", cluster="us-east", gpu_model="H100") == 16
    assert (
        at("gangway_queue_allocated_gpus", cluster="us-east", queue="research", gpu_model="any")
        == 56
    )
    assert (
        at("gangway_queue_capability_gpus", cluster="us-east", queue="research", gpu_model="H100")
        == 64
    )
    assert at("gangway_exporter_snapshot_errors_total", cluster="us-east") == 0
    only = _values(
        cli("exporter", "--snapshot", "example", "--cluster", "eu-west", "--once").stdout
    )
    assert {dict(labels).get("cluster") for _, labels in only} == {"eu-west"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param([], "give --cluster NAME", id="no-source"),
        pytest.param(
            ["--snapshot", "example", "--interval", "5x"], "--interval '5x'", id="interval"
        ),
        pytest.param(["--snapshot", "example", "--port", "70000"], "--port 70000", id="port"),
        pytest.param(
            ["--cluster", "nowhere"], "--cluster nowhere: not in the platform config", id="cluster"
        ),
        pytest.param(
            ["--snapshot", "example", "--cluster", "x", "--once"],
            "--cluster x: not in the snapshot",
            id="not-in-snapshot",
        ),
    ],
)
def test_bad_flags_are_one_error_line(args: list[str], says: str) -> None:
    ran = cli("exporter", *args)
    assert ran.returncode != 0
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith("error: ") and says in line


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    snap = tmp_path / "snapshot.yaml"
    shutil.copy(EXAMPLE_SNAPSHOT, snap)
    args = ["exporter", "--snapshot", str(snap), "--port", "0", "--interval", "0.2s"]
    proc = subprocess.Popen(
        [*GANGWAY, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("metrics: http://127.0.0.1:"), line + proc.stderr.read()  # type: ignore[union-attr]
        yield proc, snap, line.split()[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _until(url: str, name: str, labels: frozenset[tuple[str, str]], value: float) -> Values:
    deadline = time.monotonic() + 8
    while True:
        v = _scrape(url)
        if v.get((name, labels)) == value or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def test_a_snapshot_that_turns_invalid_is_counted_and_the_last_values_stay(
    served: tuple[subprocess.Popen[str], Path, str],
) -> None:
    proc, snap, url = served
    free = ("gangway_cluster_free_gpus", frozenset({("cluster", "us-east"), ("gpu_model", "H100")}))
    errors = "gangway_exporter_snapshot_errors_total"
    us = frozenset({("cluster", "us-east")})
    assert _until(url, *free, 16.0)[free] == 16.0
    snap.write_text("taken_at: [not a time\n")
    v = _until(url, errors, us, 1.0)
    assert v[(errors, us)] == 1.0 and v[free] == 16.0
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err
    assert (
        "snapshot not read" in err
        and len([x for x in err.splitlines() if "snapshot not read" in x]) >= 1
    )


def test_a_reading_that_never_worked_counts_from_zero_and_says_nothing_is_served() -> None:
    """Before any good snapshot: the error counter is served (0, then 1 per failure), the
    last-snapshot time and duration are not, and the log does not claim last good values."""
    logged: list[str] = []
    ex = Exporter(FakeReads(OSError("gone"), OSError("gone")), _decide, _own, log=logged.append)
    errors = ("gangway_exporter_snapshot_errors_total", frozenset({("cluster", "c1")}))
    assert _values(exposition(ex)) == {errors: 0.0}
    assert not ex.refresh() and not ex.refresh()
    assert _values(exposition(ex)) == {errors: 2.0}
    assert all("no good snapshot yet" in line for line in logged) and len(logged) == 2
    assert not any("last good values" in line for line in logged)


def _exporter_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*GANGWAY, "exporter", *args, "--port", "0", "--interval", "0.2s"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _failing_passes(
    cluster: str, *args: str, env: dict[str, str] | None = None
) -> tuple[Values, tuple[str, frozenset[tuple[str, str]]], str]:
    """Serve with ``args`` until ``cluster``'s error counter reaches 2, then Ctrl-C: the values
    scraped, the counter's key, and what the exporter said on stderr."""
    proc = _exporter_process(*args, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        errors = ("gangway_exporter_snapshot_errors_total", frozenset({("cluster", cluster)}))
        v = _until(url, *errors, 2.0)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return v, errors, err


def test_a_snapshot_file_that_is_not_there_serves_its_error_count(tmp_path: Path) -> None:
    v, errors, err = _failing_passes("", "--snapshot", str(tmp_path / "nope.yaml"))
    assert v[errors] >= 2.0
    assert not any(name.startswith("gangway_exporter_last") for name, _ in v)
    lines = err.strip().splitlines()
    assert lines and all("no good snapshot yet" in x for x in lines), err
    assert "last good values" not in err


def _unreachable(tmp_path: Path) -> dict[str, str]:
    """A kube config whose contexts point at a closed port: the API server does not answer."""
    import os

    import yaml

    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    contexts = [
        {"name": f"gangway-{c}", "context": {"cluster": "c", "user": "u"}}
        for c in ("us-east", "eu-west")
    ]
    kube = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "contexts": contexts,
        "current-context": "gangway-us-east",
        "users": [{"name": "u", "user": {"token": "x"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kube))
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return {**env, "KUBECONFIG": str(path)}


def test_an_api_server_that_does_not_answer_is_one_line_and_transient(tmp_path: Path) -> None:
    env = _unreachable(tmp_path)
    once = subprocess.run(
        [*GANGWAY, "exporter", "--cluster", "us-east", "--once"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = once.stderr.strip().splitlines()
    assert once.returncode == 75, once.stderr
    assert line.startswith("error: cluster us-east: ") and "cannot reach the API server" in line
    assert "Connection refused" in line and "--snapshot" not in line
    v, errors, err = _failing_passes("us-east", "--cluster", "us-east", env=env)
    assert v.get(errors, 0) >= 2.0
    lines = err.strip().splitlines()
    assert lines and all(x.count("snapshot not read (cluster us-east: context") == 1 for x in lines)
    assert "--snapshot" not in err and "Traceback" not in err


def test_docs_list_every_fleet_metric_as_declared() -> None:
    """docs/observability.md's fleet table has a row per FLEET_METRICS entry, in its order,
    with its type, its labels and its meaning exactly as declared (the HELP text served)."""
    import re

    from gangway.scheduling.fleet_metrics import FLEET_METRICS

    text = (REPO / "docs" / "observability.md").read_text()
    rows = re.findall(r"^\| `(gangway_\w+)` \| (\w+) \| ([^|]*) \| (.*) \|$", text, re.M)
    fleet = {m.name for m in FLEET_METRICS}
    table = [r for r in rows if r[0] in fleet]
    assert [r[0] for r in table] == [m.name for m in FLEET_METRICS]
    for (_name, kind, labels, meaning), m in zip(table, FLEET_METRICS, strict=True):
        assert kind == m.kind, m.name
        assert labels.strip() == ", ".join(m.labels), m.name
        assert meaning == m.meaning, m.name
