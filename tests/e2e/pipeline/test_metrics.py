"""Every metric of docs/observability.md, scraped for real: a real Prometheus (Debian's
``prometheus``) on loopback scrapes ``gangway run --metrics-port`` while the reference pipeline
runs — stage, a gang of two ranks of which one is SIGKILLed after the first checkpoint (the
gang restarts and resumes), evaluation and inference — and PromQL answers are checked against
what the run did and what lineage recorded."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gangway.cluster.prometheus import query
from gangway.step.metrics import METRICS, serve
from tests.helpers import REPO, pipeline_run
from tests.helpers.runs import logged_steps, training_workers
from tests.helpers.servers import free_port, prometheus_binary, prometheus_server

# One worker runs the module: its run (about 40 s) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("scraped-run")
STEPS, EVERY = 20, 10
SCRAPE = "500ms"


@dataclass(frozen=True)
class Scraped:
    prometheus: str
    workflow: str
    state: Path
    killed_at: int
    """The step the killed rank had logged when it was hit."""
    hit_at: float
    """When (Unix time)."""
    live: str
    """The live table's progress for the train step just before the hit."""
    took: tuple[float, float]
    """Unix times around the run."""

    def one(self, promql: str) -> float:
        found = query(self.prometheus, promql)
        assert len(found) == 1, (promql, found)
        return found[0].value

    def by(self, promql: str, label: str) -> dict[str, float]:
        return {s.labels.get(label, ""): s.value for s in query(self.prometheus, promql)}


def _rank(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def _kill_rank_one(state: Path, hit: dict[str, Any]) -> None:
    """SIGKILL rank 1 of the gang once training has logged a step past the first checkpoint."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not hit:
        runs = list((state / "runs").glob("*")) if (state / "runs").is_dir() else []
        done = [s for k, s in logged_steps(runs[0]) if k == "step"] if runs else []
        if done and done[-1] > EVERY:
            for pid in training_workers(str(state / "storage")):
                if _rank(pid) == 1:
                    hit["live"] = _live_line(runs[0])
                    hit["step"], hit["at"] = done[-1], time.time()
                    os.kill(pid, signal.SIGKILL)
                    return
        time.sleep(0.05)


def _live_line(root: Path) -> str:
    """What the live table shows for the running train step now (what it reads each second)."""
    from types import SimpleNamespace

    from gangway.cli._progress import RunProgress
    from gangway.local import NodeResult

    reader = RunProgress()
    reader.refresh(SimpleNamespace(name=root.name, metrics_dir=root / "metrics"))  # type: ignore[arg-type]
    return reader.line(NodeResult(f"{root.name}.train", "train", "train", phase="Running"))


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    prometheus_binary()
    root = tmp_path_factory.mktemp("metrics")
    state = root / "state"
    port = free_port()
    with prometheus_server(root / "prometheus", [f"127.0.0.1:{port}"], SCRAPE) as url:
        hit: dict[str, Any] = {}
        killer = threading.Thread(target=_kill_rank_one, args=(state, hit), daemon=True)
        killer.start()
        t0 = time.time()
        run = pipeline_run(
            "pipelines/train_eval_infer.py",
            *("--state-dir", str(state), "--metrics-port", str(port)),
            *("-p", f"train-steps={STEPS}", "-p", f"checkpoint-every={EVERY}"),
            *("-p", "log-every=2", "-p", "shards=1"),
        )
        t1 = time.time()
        assert f"metrics: http://127.0.0.1:{port}/metrics" in run.out.stdout
        assert hit, "rank 1 was never hit"
        # The run's server stopped with it; serve what its steps left for one last scrape, as
        # a long-lived server would have been scraped after the last step.
        _, server, _ = serve(state / "runs" / run.name / "metrics", port)
        try:
            _wait_for(url, f'gangway_step_end_time_seconds{{workflow="{run.name}",step="infer"}}')
        finally:
            server.shutdown()
            server.server_close()
        yield Scraped(url, run.name, state, hit["step"], hit["at"], hit["live"], (t0, t1))


def _wait_for(url: str, promql: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not query(url, promql):
        assert time.monotonic() < deadline, f"never scraped: {promql}"
        time.sleep(0.2)


def _q(s: Scraped, name: str, step: str) -> str:
    """The last value of ``name`` for ``step`` of the run (the run's server is gone by now:
    an instant query would find the series stale)."""
    return f'last_over_time({name}{{workflow="{s.workflow}",step="{step}"}}[10m])'


def _all(s: Scraped, name: str) -> str:
    return f'last_over_time({name}{{workflow="{s.workflow}"}}[10m])'


@pytest.mark.e2e
def test_training_reaches_its_target_and_resumes_once(scraped: Scraped) -> None:
    s = scraped
    assert s.one(f"max({_q(s, 'gangway_train_step', 'train')})") == STEPS
    ranks = s.by(_q(s, "gangway_train_step", "train"), "rank")
    assert ranks == {"0": STEPS, "1": STEPS}  # every rank, the resumed ones included
    assert s.one(_q(s, "gangway_train_target_steps", "train")) == STEPS
    assert s.one(_q(s, "gangway_train_resumes_total", "train")) == 1
    assert s.one(_q(s, "gangway_step_attempts_total", "train")) == 2  # killed, then resumed
    assert s.one(_q(s, "gangway_train_eta_seconds", "train")) == 0  # at the end
    last = s.one(_q(s, "gangway_train_last_step_time_seconds", "train"))
    assert s.took[0] < last < s.took[1]
    assert 0 < s.one(_q(s, "gangway_train_step_seconds", "train")) < 5
    assert s.one(_q(s, "gangway_train_tokens_per_second", "train")) > 1000
    assert 0 < s.one(_q(s, "gangway_train_loss", "train")) < 10
    # No MFU on CPUs: it needs the device's peak FLOPs.
    assert not query(s.prometheus, _q(s, "gangway_train_mfu_ratio", "train"))
    windows = s.one(_q(s, "gangway_train_step_duration_seconds_count", "train"))
    assert windows >= STEPS / 2  # a window every 2 steps, the redone ones included
    seconds = s.one(_q(s, "gangway_train_step_duration_seconds_sum", "train"))
    assert 0 < seconds / windows < 5


@pytest.mark.e2e
def test_checkpoints_are_timed(scraped: Scraped) -> None:
    s = scraped
    saved = s.one(_q(s, "gangway_checkpoint_save_duration_seconds_count", "train"))
    assert saved >= 2  # step 10 and step 20 (and one more when the kill came at a save)
    assert 0 < s.one(_q(s, "gangway_checkpoint_save_duration_seconds_sum", "train")) < 60
    at = s.one(_q(s, "gangway_checkpoint_last_complete_time_seconds", "train"))
    assert s.took[0] < at < s.took[1]


@pytest.mark.e2e
def test_evaluation_and_inference_report_items(scraped: Scraped) -> None:
    s = scraped
    for step, items in (("evaluate", 2), ("infer", None)):
        done = s.one(_q(s, "gangway_items_processed_total", step))
        planned = s.one(_q(s, "gangway_items_planned_total", step))
        assert done == planned, step
        if items is not None:
            assert done == items  # the checkpoints at steps 10 and 20
        assert s.one(_q(s, "gangway_items_per_second", step)) > 0


@pytest.mark.e2e
def test_every_step_has_a_start_and_an_end(scraped: Scraped) -> None:
    s = scraped
    starts = s.by(_all(s, "gangway_step_start_time_seconds"), "step")
    ends = s.by(_all(s, "gangway_step_end_time_seconds"), "step")
    assert set(starts) >= {"stage", "split", "train", "evaluate", "infer"}
    assert set(ends) == set(starts)
    for step, t in starts.items():
        assert s.took[0] <= t <= ends[step] <= s.took[1], step
    labels = query(s.prometheus, _q(s, "gangway_step_start_time_seconds", "train"))
    assert {x.labels["team"] for x in labels} == {"research"}
    assert {x.labels["queue"] for x in labels} == {"research"}
    assert {x.labels["pipeline"] for x in labels} == {"train-eval-infer"}


@pytest.mark.e2e
def test_device_hours_per_team_match_lineage(scraped: Scraped) -> None:
    """CPU-hours here (each process of a CPU step is a device): Prometheus's counter against
    devices × (end − start) of every attempt lineage recorded, within 1 %."""
    import mlflow

    from gangway.lineage.attempts import Attempt

    s = scraped
    by_team = s.by(f"sum by (team) ({_all(s, 'gangway_device_seconds_total')})", "team")
    client = mlflow.MlflowClient(f"sqlite:///{s.state / 'mlflow.db'}")
    (exp,) = [e for e in client.search_experiments() if e.name == "train-eval-infer"]
    runs = client.search_runs([exp.experiment_id], "tags.`gangway.kind` = 'step'")
    recorded: dict[str, float] = {}
    now = int(time.time() * 1000)
    for r in runs:
        a = Attempt.from_run(r.data.tags, r.info.start_time, r.info.end_time, r.info.status)
        if a.workflow == s.workflow:
            recorded[a.team] = recorded.get(a.team, 0.0) + a.device_seconds(now)
    assert set(by_team) == set(recorded) == {"research"}
    got, want = by_team["research"], recorded["research"]
    print(f"\ndevice-seconds: prometheus {got:.2f}, lineage {want:.2f}")
    assert by_team["research"] == pytest.approx(recorded["research"], rel=0.01)
    trained = [r for r in runs if r.data.tags.get("gangway.step") == "train"]
    assert len(trained) == 2 and all(r.data.tags["gangway.devices"] == "2" for r in trained)


def test_docs_list_every_metric() -> None:
    """docs/observability.md's table names every declared metric, with its type and labels."""
    text = (REPO / "docs" / "observability.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(gangway_\w+)` \|.*$", text, re.M)}
    for m in METRICS:
        assert m.name in rows, f"{m.name} is not in docs/observability.md"
        assert f"| {m.kind} |" in rows[m.name], m.name
        for label in m.labels:
            assert label in rows[m.name], (m.name, label)


@pytest.mark.e2e
def test_status_shows_progress_from_prometheus(scraped: Scraped) -> None:
    """``gangway status`` on a cluster: the training step's line, as Prometheus had it when
    the rank was hit (mid-training), beside a workflow object whose train step runs."""
    import copy
    import json

    from rich.console import Console

    from gangway.cli.cluster_cmds import render_status
    from gangway.cluster.prometheus import workflow_progress

    s = scraped
    at = s.hit_at + 1.0  # two scrapes after the hit, before the gang's restart resumes
    found = workflow_progress(s.prometheus, s.workflow, at=at)
    train = found["train"]
    assert train.target == STEPS and EVERY <= (train.done or 0) <= s.killed_at + 2
    assert train.tokens_per_s and train.eta_s is not None and train.checkpoint_at
    line = train.line(at)
    assert re.fullmatch(r"step \d+/20 · [\d.]+k tok/s · ETA \d+s · ckpt \d+s ago", line), line
    wf = json.loads((REPO / "tests/data/workflow_status.json").read_text())
    running = copy.deepcopy(wf)
    for node in running["status"]["nodes"].values():
        if node.get("templateName") == "train":
            node["phase"] = "Running"
    out = Console(width=200, record=True)
    out.print(render_status(running, {"train": line}))
    assert line in out.export_text()


@pytest.mark.e2e
def test_the_live_table_shows_training_progress(scraped: Scraped) -> None:
    """Read from the run's metrics directory while it trained, as the live table reads it."""
    line = scraped.live
    assert re.fullmatch(r"step \d+/20 · [\d.]+k tok/s · ETA \d+s · ckpt \d+s ago", line), line
    assert EVERY <= int(line.split()[1].split("/")[0]) <= scraped.killed_at
