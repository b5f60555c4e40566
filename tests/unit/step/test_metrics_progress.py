"""Step metrics without a server: the ETA rule, progress read from samples and from a real
metrics directory written by real processes, metrics off costing no import, and the
``--metrics-port`` mistakes a user makes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gangway.step.progress import Progress, duration, eta_seconds, from_samples, read_dir, si
from tests.helpers import REPO, cli


def test_eta_counts_steps_left_and_checkpoints_left() -> None:
    assert eta_seconds(0, 100, 0.5) == 50
    # Checkpoints at 50 and 100 are still to save from step 40; at 60, only the one at 100.
    assert eta_seconds(40, 100, 0.5, checkpoint_every=50, checkpoint_seconds=3) == 30 + 6
    assert eta_seconds(60, 100, 0.5, checkpoint_every=50, checkpoint_seconds=3) == 20 + 3
    # Saves at 100 and at the last step, 105 (training always saves at its last step).
    assert eta_seconds(90, 105, 1.0, checkpoint_every=50, checkpoint_seconds=2) == 15 + 2 * 2
    assert eta_seconds(100, 100, 0.5, checkpoint_every=50, checkpoint_seconds=3) == 0


def test_durations_and_rates_read_at_a_glance() -> None:
    assert [duration(s) for s in (42, 65, 600, 3 * 3600 + 720, 100_800)] == [
        "42s",
        "1m 5s",
        "10m",
        "3h 12m",
        "1d 4h",
    ]
    assert [si(v) for v in (1.9e6, 23_400, 512, 3.25)] == ["1.9M", "23.4k", "512", "3.2"]


def test_progress_from_samples_takes_the_furthest_rank() -> None:
    wf = {"workflow": "w", "step": "train"}
    found = from_samples(
        [
            ("gangway_train_step", {**wf, "rank": "0"}, 41200),
            ("gangway_train_step", {**wf, "rank": "1"}, 41199),
            ("gangway_train_target_steps", wf, 90000),
            ("gangway_train_tokens_per_second", wf, 1.9e6),
            ("gangway_train_eta_seconds", wf, 100_800),
            ("gangway_checkpoint_last_complete_time_seconds", wf, 1000.0),
            ("gangway_train_resumes_total", wf, 1),
            ("gangway_step_start_time_seconds", wf, 5.0),  # not progress
        ]
    )
    p = found[("w", "train")]
    assert (p.done, p.target, p.resumes) == (41200, 90000, 1)
    line = p.line(now=1360.0)
    assert line == "step 41,200/90,000 · 1.9M tok/s · ETA 1d 4h · ckpt 6m ago · resumed 1×"
    assert Progress("w", "infer", items_done=3, items_target=8).line(0) == "3/8 items"


_WRITER = """
import sys, time
from gangway.step.metrics import StepMetrics
rank = int(sys.argv[1])
m = StepMetrics(rank=rank)
m.set("gangway_train_step", 7 + rank)
if rank == 0:
    m.set("gangway_train_target_steps", 20)
    m.set("gangway_train_eta_seconds", 13.0)
    m.set("gangway_checkpoint_last_complete_time_seconds", time.time())
    m.started(time.time() - 10, 2, "cpu")
    m.ended(time.time())
"""


def test_a_run_directory_written_by_two_processes(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GANGWAY_METRICS_DIR": str(tmp_path),
        "GANGWAY_STEP": "train",
        "GANGWAY_WORKFLOW_NAME": "wf-1",
        "GANGWAY_TEAM": "research",
    }
    for rank in (0, 1):
        subprocess.run([sys.executable, "-c", _WRITER, str(rank)], env=env, check=True, cwd=REPO)
    p = read_dir(tmp_path)[("wf-1", "train")]
    assert (p.done, p.target, p.eta_s) == (8, 20, 13.0)
    assert p.line(p.checkpoint_at or 0).startswith("step 8/20 · ETA 13s · ckpt 0s ago")
    assert read_dir(tmp_path / "none") == {}


def test_metrics_off_import_nothing() -> None:
    """Without GANGWAY_METRICS_DIR a step's tracker records no metric and never imports
    prometheus-client (a step's start-up pays nothing)."""
    code = (
        "import sys, time\n"
        "from gangway.step.tracking import StepTracker\n"
        "with StepTracker(env={'GANGWAY_STEP': 's'}) as t:\n"
        "    t.metrics.set('gangway_train_step', 3)\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_unknown_metric_names_the_declared_ones() -> None:
    from gangway.step.metrics import spec

    with pytest.raises(KeyError, match="gangway_train_step"):
        spec("gangway_train_stpe")


def test_metrics_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = cli(
            "run",
            "pipelines/train_eval_infer.py",
            *("--state-dir", str(tmp_path), "--metrics-port", str(port)),
        )
    assert res.returncode == 1
    assert f"error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}" in res.stderr
    assert "give another port, or 0" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_metrics_port_out_of_range_names_the_option(tmp_path: Path) -> None:
    res = cli("run", "pipelines/train_eval_infer.py", "--metrics-port", "70000")
    assert res.returncode == 2
    assert "--metrics-port" in res.stderr and "Traceback" not in res.stderr


def test_a_pipe_says_how_far_training_is(tmp_path: Path) -> None:
    """Without a terminal (CI, ``| tee``) the ``still running`` line carries the progress the
    live table shows."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from gangway.cli._progress import _Lines
    from gangway.local import NodeResult

    env = {**os.environ, "GANGWAY_METRICS_DIR": str(tmp_path), "GANGWAY_STEP": "train"}
    env["GANGWAY_WORKFLOW_NAME"] = "wf-1"
    for rank in (0, 1):
        subprocess.run([sys.executable, "-c", _WRITER, str(rank)], env=env, check=True, cwd=REPO)
    now = [100.0]
    out = Console(width=100, file=io.StringIO())
    lines = _Lines(out=out, clock=lambda: now[0], every=30.0)
    ex = SimpleNamespace(name="wf-1", procs=SimpleNamespace(stopping=None), metrics_dir=tmp_path)
    lines.start(ex)  # type: ignore[arg-type]
    lines.event(NodeResult("wf-1.train", "train", "train", phase="Running"))
    now[0] += 31
    lines.tick()
    said = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert said[0] == "    0s  train: started"
    assert said[1].startswith("   31s  still running: train (31s, step 8/20 · ETA 13s · ckpt ")
