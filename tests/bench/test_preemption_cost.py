"""Benchmark: wall time lost per preemption as a function of the checkpoint interval.

A gang of 2 pods trains the tiny model through the local executor (the compiled Volcano Job,
restarted as Volcano would). For each interval K (steps), one run is uninterrupted and one has
a training rank SIGKILLed at a random step; time lost = T(interrupted) − T(uninterrupted). It
covers the work since the last checkpoint plus detection and gang restart. Goal locally: lost
≤ interval (in seconds) + 15 s. Results go to ``bench-results/preemption_cost.json`` and the
table in ``docs/checkpoint-interval.md``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hera.workflows import DAG, Task

from gangway.local import Clock, LocalExecutor, workflow_from_template
from gangway.pipeline import gang_step, pipeline
from tests.helpers import REPO
from tests.helpers.runs import logged_steps as _logged_steps
from tests.helpers.runs import training_workers as _training_workers

pytestmark = pytest.mark.benchmark
STEPS = 120
INTERVALS = (10, 30, 60)


def _workflow(corpus: str, state: Path, every: int) -> dict[str, Any]:
    with pipeline(
        "preempt",
        team="research",
        title="t",
        description="d",
        parameters={"nodes": 2, "procs-per-node": 1, "gpus-per-node": 0},
    ) as w:
        train = gang_step(
            "train",
            module="components.training",
            args=[
                "--data",
                corpus,
                "--checkpoints",
                f"file://{state}/ck/{{{{workflow.uid}}}}",
                "--set",
                f"steps={STEPS}",
                "--set",
                f"checkpoint_every={every}",
                "--set",
                "log_every=1",
            ],
            inputs=["nodes", "procs-per-node", "gpus-per-node"],
        )
        with DAG(name="main"):
            Task(
                name="train",
                template=train,
                arguments={
                    k: f"{{{{workflow.parameters.{k}}}}}"
                    for k in ("nodes", "procs-per-node", "gpus-per-node")
                },
            )
    return workflow_from_template(w.to_dict(), {"mlflow-tracking-uri": ""})


def _timed(corpus: str, state: Path, every: int, kill_at: int | None) -> float:
    ex = LocalExecutor(_workflow(corpus, state, every), state, clock=Clock(sleep=lambda s: None))

    def killer() -> None:
        while True:
            done = [s for k, s in _logged_steps(ex.root) if k == "step"]
            workers = _training_workers(str(state / "ck"))
            if done and done[-1] >= (kill_at or 0) and workers:
                os.kill(random.choice(workers), signal.SIGKILL)
                return
            time.sleep(0.02)

    if kill_at is not None:
        threading.Thread(target=killer, daemon=True).start()
    t0 = time.perf_counter()
    res = ex.run()
    assert res.phase == "Succeeded", [(n.name, n.message) for n in res.nodes]
    return time.perf_counter() - t0


def test_time_lost_per_preemption(corpus_uri: str, tmp_path: Path) -> None:
    rng = random.Random(7)
    rows = []
    for every in INTERVALS:
        base = _timed(corpus_uri, tmp_path / f"b{every}", every, None)
        step_s = base / STEPS  # includes start-up: an upper bound on the per-step time
        lost = []
        for trial in range(2):
            kill_at = rng.randint(every, STEPS - 10)
            t = _timed(corpus_uri, tmp_path / f"k{every}-{trial}", every, kill_at)
            lost.append(t - base)
        interval_s = every * step_s
        rows.append(
            {
                "interval_steps": every,
                "interval_s": round(interval_s, 1),
                "uninterrupted_s": round(base, 1),
                "lost_s_median": round(statistics.median(lost), 1),
                "lost_s_max": round(max(lost), 1),
                "within_goal": max(lost) <= interval_s + 15,
            }
        )
    print("\npreemption cost:", json.dumps(rows, indent=2))
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "preemption_cost.json").write_text(json.dumps(rows, indent=2) + "\n")
    assert rows
