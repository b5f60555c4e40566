"""The rendered alerting rules in a real Prometheus (Debian's ``prometheus``) over a real local
gang: a training rank is SIGSTOPped until ``GangwayTrainingStalled`` fires (its thresholds
lowered through the config's ``alerts:`` block), then SIGCONTed — the alert clears and the run
finishes."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.cluster.prometheus import query
from gangway.config import EXAMPLE, load_config
from gangway.config.alerts import Alerts, Thresholds
from gangway.local import Clock, LocalExecutor
from gangway.render.alerts import rule_groups
from gangway.step.metrics import serve
from tests.helpers import gang_only
from tests.helpers.runs import logged_steps, training_workers
from tests.helpers.servers import prometheus_binary, prometheus_server

FIRING = 'ALERTS{alertname="GangwayTrainingStalled", alertstate="firing"}'
FLOOR_S = 4


def _rules(path: Path) -> Path:
    """us-east's rules with a stall at 3 x the step time and at least 4 s, confirmed for 1 s."""
    alerts = Alerts(
        confirm_for="1s", defaults=Thresholds(stall_factor=3, stall_floor=f"{FLOOR_S}s")
    )
    cfg = load_config(EXAMPLE).model_copy(update={"alerts": alerts})
    path.write_text(yaml.safe_dump({"groups": rule_groups(cfg, "us-east")}))
    return path


def _rank(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [int(item[5:]) for item in env if item.startswith(b"RANK=")]
    return ranks[0] if ranks else None


def _until(what: Callable[[], Any], seconds: float, why: str) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := what()):
        assert time.monotonic() < deadline, why
        time.sleep(0.1)
    return found


@pytest.mark.e2e
def test_a_stopped_rank_fires_training_stalled_and_clears_when_it_goes_on(
    tmp_path: Path, corpus_uri: str
) -> None:
    prometheus_binary()
    storage = tmp_path / "storage"
    values = {
        "train-steps": "80",
        "checkpoint-every": "80",
        "log-every": "1",
        "mlflow-tracking-uri": "",
        "storage-root": f"file://{storage}",
    }
    ex = LocalExecutor(
        gang_only(corpus_uri, values), tmp_path / "state", clock=Clock(sleep=lambda s: None)
    )
    port, server, _ = serve(ex.metrics_dir, 0)
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(run=ex.run()), daemon=True)
    stopped: list[int] = []
    rules = _rules(tmp_path / "rules.yaml")
    try:
        with prometheus_server(tmp_path / "prom", [f"127.0.0.1:{port}"], "500ms", rules) as url:
            runner.start()
            _until(
                lambda: [s for k, s in logged_steps(ex.root) if k == "step" and s >= 5],
                120,
                "training never reached step 5",
            )
            _until(lambda: query(url, "gangway_train_step_seconds"), 10, "never scraped")
            assert not query(url, FIRING), "a progressing gang must not be stalled"
            (victim,) = _until(
                lambda: [p for p in training_workers(str(storage)) if _rank(p) == 1],
                10,
                "no rank 1",
            )
            os.kill(victim, signal.SIGSTOP)
            stopped.append(victim)
            t0 = time.monotonic()
            (alert,) = _until(lambda: query(url, FIRING), 30, "GangwayTrainingStalled never fired")
            fired = time.monotonic() - t0
            assert alert.labels["step"] == "train" and alert.labels["team"] == "research"
            assert fired >= FLOOR_S - 1  # no earlier than the floor (less a scrape or two)
            os.kill(victim, signal.SIGCONT)
            stopped.clear()
            t1 = time.monotonic()
            _until(lambda: not query(url, FIRING), 20, "the alert never cleared")
            cleared = time.monotonic() - t1
            print(
                f"\nstalled: fired {fired:.1f}s after SIGSTOP, cleared {cleared:.1f}s after SIGCONT"
            )
            runner.join(timeout=180)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        server.shutdown()
        server.server_close()
    assert not runner.is_alive(), "the run did not finish"
    assert result["run"].phase == "Succeeded", [(n.name, n.message) for n in result["run"].nodes]
