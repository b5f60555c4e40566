"""``gangway usage`` end to end: step attempts recorded through lineage's own path (records
spooled with the tags a step's tracker writes, then synced into a real sqlite MLflow store),
read back as a table, JSON and a plot; the same attempts' samples written by a step's
``StepMetrics`` in a process of their own, scraped by a real Prometheus and read back with
``--prometheus``; and every kind of bad input as one ``error:`` line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gangway.lineage import sqlite_uri, sync
from gangway.lineage.attempts import RUNNING_MS, attempt_tags
from gangway.lineage.records import MetricPoint, Status, StepRecord, WorkflowInfo
from gangway.lineage.spool import Spool
from tests.helpers import Output, cli
from tests.helpers.servers import free_port

H = 3_600_000
NOW = int(time.time() * 1000)


@dataclass(frozen=True)
class Step:
    """One attempt as a test writes it: who, what it held, when, how it ended."""

    workflow: str
    step: str
    team: str
    env: dict[str, str]
    start_ms: int
    end_ms: int
    status: Status = "FINISHED"
    mfu: tuple[float, ...] = ()

    @property
    def environ(self) -> dict[str, str]:
        return {
            "GANGWAY_TEAM": self.team,
            "GANGWAY_QUEUE": f"{self.team}-q",
            "GANGWAY_PIPELINE": "train-eval-infer",
            "GANGWAY_WORKFLOW_NAME": self.workflow,
            "GANGWAY_SUBMITTED_MS": str(self.start_ms - 120_000),
            **self.env,
        }


GANG = {
    "GANGWAY_GPUS": "8",
    "WORLD_SIZE": "16",
    "LOCAL_WORLD_SIZE": "8",
    "GANGWAY_GPU_MODEL": "H100",
}
CPUS = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}
STEPS = [
    # A 2 × 8 H100 gang preempted after an hour, then trained for another hour.
    Step("train-a", "train", "research", GANG, NOW - 3 * H, NOW - 2 * H, "KILLED"),
    Step(
        "train-a", "train", "research", GANG, NOW - 2 * H + 60_000, NOW - H + 60_000, mfu=(0.3, 0.5)
    ),
    # A 4-process CPU evaluation of half an hour.
    Step("eval-b", "evaluate", "vision", CPUS, NOW - 90 * 60_000, NOW - H),
]
OLD = Step("train-old", "train", "research", GANG, NOW - 240 * H, NOW - 239 * H)


def _record(s: Step) -> StepRecord:
    tags = {**attempt_tags(s.environ, s.start_ms), RUNNING_MS: str(s.start_ms + 60_000)}
    return StepRecord(
        workflow=WorkflowInfo(
            pipeline="train-eval-infer", name=s.workflow, uid=f"uid-{s.workflow}"
        ),
        step=s.step,
        status=s.status,
        start_ms=s.start_ms,
        end_ms=s.end_ms,
        tags=tags,
        metrics=[MetricPoint(key="mfu", value=v, step=i) for i, v in enumerate(s.mfu)],
    )


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A new sqlite MLflow store, holding no run."""
    from gangway.lineage import store as stores

    uri = sqlite_uri(tmp_path_factory.mktemp("empty") / "mlflow.db")
    stores.prepare(uri, write=True)
    return uri


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, empty: str) -> str:
    """A sqlite MLflow store holding STEPS and OLD, sent through the spool as steps send (into
    a copy of ``empty``: a store is built once)."""
    root = tmp_path_factory.mktemp("usage")
    shutil.copy(empty.removeprefix("sqlite:///"), root / "mlflow.db")
    uri = sqlite_uri(root / "mlflow.db")
    spool = Spool(str(root / "spool"), uri)
    for s in [OLD, *STEPS]:
        spool.write(_record(s))
    report = sync(spool, uri)
    assert report.error is None and not report.pending
    return uri


def _json(*args: str) -> dict[str, Any]:
    res = cli("usage", *args, "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _by(doc: dict[str, Any], key: str = "team") -> dict[str, dict[str, Any]]:
    return {r[key]: r for r in doc["rows"]}


def test_usage_from_lineage_by_team(store: str) -> None:
    rows = _by(_json("--tracking-uri", store, "--since", "7d"))
    research, vision = rows["research"], rows["vision"]
    assert research["gpu_hours"] == pytest.approx(32.0)  # 16 GPUs × (1 h + 1 h); OLD left out
    assert (research["runs"], research["attempts"], research["preemptions"]) == (1, 2, 1)
    assert research["util"] == pytest.approx(0.4)
    assert research["wait_mean_s"] == pytest.approx(180)  # submitted 2 min before, ran 1 after
    assert vision["cpu_hours"] == pytest.approx(2.0) and vision["gpu_hours"] == 0
    assert vision["util"] is None
    everything = _by(_json("--tracking-uri", store, "--since", "30d"))
    assert everything["research"]["gpu_hours"] == pytest.approx(48.0)


def test_the_table_fits_80_columns(store: str) -> None:
    for by in ("team,queue", "team,queue,gpu_model,step"):
        res = cli("usage", "--tracking-uri", store, "--by", by, env={"COLUMNS": "80"})
        assert res.returncode == 0, res.stdout + res.stderr
        assert max(len(line) for line in res.stdout.splitlines()) <= 80, res.stdout
    two = cli("usage", "--tracking-uri", store, "--by", "team,queue", env={"COLUMNS": "80"})
    research = next(line for line in two.stdout.splitlines() if line.startswith("research"))
    assert research.split() == [
        "research",
        "research-q",
        "1",
        "2",
        "32.0",
        "0",
        "3m",
        "2.000",
        "40%",
        "1",
    ]


def test_run_and_team_filter(store: str) -> None:
    doc = _json("--tracking-uri", store, "--by", "run,step", "--team", "research", "--since", "12h")
    assert [(r["workflow"], r["step"]) for r in doc["rows"]] == [("train-a", "train")]


def test_plot(store: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "out" / "usage.png"
    res = cli("usage", "--tracking-uri", store, "--plot", str(png), "--output", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    daily = json.loads(res.stdout)["daily"]
    assert daily["device"] == "gpu" and sum(daily["hours"]["research"]) == pytest.approx(32.0)


def _one_error(res: Output, *words: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "Traceback" not in out and out.count("error:") == 1, out
    for w in words:
        assert w in out, out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(("--since", "7x"), ("--since '7x'", "7d"), id="since"),
        pytest.param(("--by", "team,quue"), ("--by 'quue'", "did you mean 'queue'"), id="by"),
        pytest.param(
            ("--prometheus", f"http://127.0.0.1:{free_port()}"),
            ("cannot be reached", "--prometheus"),
            id="prometheus-down",
        ),
        pytest.param(
            ("--prometheus", "http://127.0.0.1:9", "--by", "gpu_model"),
            ("--by gpu_model", "leave out --prometheus"),
            id="prometheus-no-gpu-model",
        ),
        pytest.param(
            ("--state-dir", "nowhere"), ("no tracking store", "--tracking-uri"), id="no-store"
        ),
        pytest.param(
            ("--prometheus", "notaurl"), ("--prometheus notaurl: not an http(s) URL",), id="url"
        ),
    ],
)
def test_bad_input_is_one_clear_line(args: tuple[str, ...], words: tuple[str, ...]) -> None:
    _one_error(cli("usage", *args, env={"MLFLOW_TRACKING_URI": None}), *words)


def test_a_store_without_runs_or_a_window_without_any(store: str, empty: str) -> None:
    _one_error(cli("usage", "--tracking-uri", empty), "no Gangway step runs", "--tracking-uri")
    _one_error(
        cli("usage", "--tracking-uri", store, "--team", "RESEARCH"),
        "--team RESEARCH: no step runs of that team",
        "teams there: research, vision",
    )
    _one_error(cli("usage", "--tracking-uri", store, "--since", "5m"), "widen --since")


def test_plot_without_matplotlib(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    _one_error(cli("usage", "--tracking-uri", store, "--plot", "u.png"), "--plot needs matplotlib")


# ---- Prometheus ------------------------------------------------------------------------------

EMIT = """
import json, sys
from gangway.step.metrics import StepMetrics
for s in json.loads(sys.argv[1]):
    m = StepMetrics(s["env"], step=s["step"])
    m.started(s["start"], s["devices"], s["device"])
    for v in s["mfu"]:
        m.set("gangway_train_mfu_ratio", v)
    m.ended(s["end"])
"""


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping STEPS' samples, written by a step's own ``StepMetrics`` in a
    child process (prometheus-client's multiprocess mode is per process); yields its URL once
    it has scraped them."""
    from gangway.cluster.prometheus import query
    from gangway.lineage.attempts import held
    from gangway.step.metrics import serve
    from tests.helpers.servers import prometheus_server

    samples = tmp_path / "samples"
    todo = []
    for s in STEPS:
        h = held(s.environ)
        env = {**s.environ, "GANGWAY_METRICS_DIR": str(samples)}
        todo.append(
            {
                "env": env,
                "step": s.step,
                "start": s.start_ms / 1000,
                "end": s.end_ms / 1000,
                "devices": h.devices,
                "device": h.device,
                "mfu": [sum(s.mfu) / len(s.mfu)] if s.mfu else [],
            }
        )
    subprocess.run([sys.executable, "-c", EMIT, json.dumps(todo)], check=True, timeout=60)
    port, server, *_ = serve(samples)
    try:
        with prometheus_server(tmp_path / "prom", [f"127.0.0.1:{port}"], "500ms") as url:
            deadline = time.monotonic() + 10
            while len(query(url, "gangway_device_seconds_total")) < 2:
                assert time.monotonic() < deadline, "Prometheus scraped nothing in 10 s"
                time.sleep(0.2)
            yield url
    finally:
        server.shutdown()


def test_prometheus_agrees_with_lineage(store: str, prometheus: str) -> None:
    lineage = _by(_json("--tracking-uri", store, "--since", "1d"))
    prom_doc = _json("--prometheus", prometheus, "--since", "1d")
    prom = _by(prom_doc)
    assert prom.keys() == lineage.keys() == {"research", "vision"}
    for team in prom:
        for field in ("gpu_hours", "cpu_hours", "runs", "attempts"):
            assert prom[team][field] == pytest.approx(lineage[team][field], rel=0.01), (team, field)
    assert prom["research"]["util"] == pytest.approx(lineage["research"]["util"], rel=0.01)
    assert prom["research"]["wait_mean_s"] is None  # not in Prometheus
    assert prom_doc["source"].endswith("(util: mfu)")
    by_step = _by(_json("--prometheus", prometheus, "--by", "step,run"), "step")
    assert by_step["train"]["gpu_hours"] == pytest.approx(32.0, rel=0.01)
    assert by_step["evaluate"]["workflow"] == "eval-b"
