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
