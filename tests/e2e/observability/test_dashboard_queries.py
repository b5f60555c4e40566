"""Every query of the rendered Grafana dashboards, asked of a real Prometheus (Debian's
``prometheus``, scraping every 500 ms): each one parses, and each one over Gangway's own metrics
returns data once real samples are scraped.

Step samples are written by :class:`gangway.step.metrics.StepMetrics` in a child process (a
two-rank training step and an evaluation step, as a step's code writes them) and served by
:func:`gangway.step.metrics.serve`, as a pod serves them. The fleet samples are what the
exporter's pure side (:mod:`gangway.scheduling.fleet_samples`) decides over the example
snapshot, served in the exposition format by a small server here (the same samples
``gangway exporter --snapshot example`` serves, without its loop). Argo's and DCGM's series
are not served: their queries are only parsed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gangway.contract import ENV_METRICS_DIR, ENV_PIPELINE, ENV_QUEUE, ENV_TEAM
from gangway.contract import WORKFLOW_IDENTITY_ENV as WF_ENV
from gangway.scheduling.fleet_metrics import FLEET_METRICS
from gangway.scheduling.fleet_samples import exporter_families, fleet_families
from gangway.scheduling.snapshot.example import example_snapshot
from gangway.step.metrics import METRICS, serve
from tests.helpers.dashboards import metric_names, queries, rendered, stored, substituted
from tests.helpers.servers import prometheus_binary, prometheus_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

WORKFLOW = "train-eval-x7k2p"
VALUES = {
    "datasource": "prometheus",
    "workflow": WORKFLOW,
    "team": "research",
    "queue": "research",
    "cluster": "us-east",
    "gpu_model": "H100",
    "__rate_interval": "4s",
    "__range": "1m",
}
"""What Grafana puts for each variable (one value each, as a single selection does)."""
OURS = {n for m in (*METRICS, *FLEET_METRICS) for n in stored(m)}

# A step's code, as it writes its samples: rank 0 and 1 of `train`, and an `eval` step's items.
_STEPS = textwrap.dedent(
    """
    import time
    from gangway.step.metrics import StepMetrics

    t0 = time.time()
    train = [StepMetrics(step="train", rank=r) for r in (0, 1)]
    ev = StepMetrics(step="eval")
    for m in (train[0], ev):
        m.set("gangway_step_start_time_seconds", t0)
        m.inc("gangway_step_attempts_total")
    train[0].set("gangway_train_target_steps", 1000)
    train[0].inc("gangway_train_resumes_total")
    ev.items_start(500)
    for i in range(1, 200):
        now = time.time()
        for m in train:
            m.set("gangway_train_step", i * 2 - m.rank)
        r0 = train[0]
        r0.set("gangway_train_tokens_per_second", 35000 + i)
        r0.set("gangway_train_mfu_ratio", 0.41)
        r0.set("gangway_train_loss", 3.0 / i)
        r0.set("gangway_train_step_seconds", 0.08)
        r0.observe("gangway_train_step_duration_seconds", 0.08)
        r0.set("gangway_train_last_step_time_seconds", now)
        r0.set("gangway_train_eta_seconds", 1000 - i)
        r0.set("gangway_checkpoint_last_complete_time_seconds", now - 3)
        r0.observe("gangway_checkpoint_save_duration_seconds", 1.5)
        r0.inc("gangway_device_seconds_total", 8 * 0.1, device="gpu")
        ev.inc("gangway_device_seconds_total", 0.1, device="cpu")
        ev.items_done(1)
        time.sleep(0.1)
    """
)


def _fleet_text(scrapes: int) -> bytes:
    """What the exporter's pure side (:mod:`gangway.scheduling.fleet_samples`) decides over the
    example snapshot, in the exposition format; the team counter grows by one snapshot's
    increment a scrape, as the exporter adds them up."""
    snap = example_snapshot()
    families = [
        *fleet_families(snap, previous=snap.taken_at - timedelta(minutes=1)),
        *exporter_families(list(snap.clusters), errors=0, last_ok=time.time(), duration=0.2),
    ]
    lines = []
    for f in families:
        base = f.spec.name.removesuffix("_total") if f.spec.kind == "counter" else f.spec.name
        lines.append(f"# TYPE {base} {f.spec.kind}")
        for values, value in f.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in zip(f.spec.labels, values, strict=True))
            total = value * scrapes if f.spec.kind == "counter" else value
            lines.append(f"{f.spec.name}{{{labels}}} {total}")
    return ("\n".join(lines) + "\n").encode()


class _Fleet(BaseHTTPRequestHandler):
    scrapes = 0

    def do_GET(self) -> None:
        type(self).scrapes += 1
        body = _fleet_text(self.scrapes)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _ask(url: str, promql: str) -> dict[str, Any]:
    """``/api/v1/query``'s answer (a syntax error is its 400 answer, not an exception)."""
    q = urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
            answer: dict[str, Any] = json.load(r)
    except urllib.error.HTTPError as e:
        answer = json.load(e)
    return answer


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    prometheus_binary()
    root = tmp_path_factory.mktemp("dashboards")
    env = {
        **os.environ,
        ENV_METRICS_DIR: str(root / "metrics"),
        WF_ENV["name"]: WORKFLOW,
        ENV_TEAM: "research",
        ENV_QUEUE: "research",
        ENV_PIPELINE: "train-eval",
    }
    child = subprocess.Popen([sys.executable, "-c", _STEPS], env=env)
    steps_port, steps, _ = serve(root / "metrics", 0)
    fleet = ThreadingHTTPServer(("127.0.0.1", 0), _Fleet)
    threading.Thread(target=fleet.serve_forever, daemon=True).start()
    targets = [f"127.0.0.1:{steps_port}", f"127.0.0.1:{fleet.server_address[1]}"]
    try:
        with prometheus_server(root / "prometheus", targets, "500ms") as url:
            yield url
    finally:
        child.kill()
        child.wait()
        steps.shutdown()
        fleet.shutdown()


ALL = [(where, expr) for board in rendered().values() for where, expr in queries(board)]


def test_every_query_parses(prometheus: str) -> None:
    """Prometheus's own parser takes every query (a syntax error is a 400 `bad_data`)."""
    refused = []
    for where, expr in ALL:
        answer = _ask(prometheus, substituted(expr, VALUES))
        if answer["status"] != "success":
            refused.append(f"{where}: {answer.get('error')}")
    assert not refused, "\n".join(refused)


def test_every_query_over_gangways_metrics_returns_data(prometheus: str) -> None:
    """Once the samples are scraped, every query that names only Gangway's own metrics (the
    steps' and the exporter's) has an answer for the variables' values."""
    ours = [(w, substituted(e, VALUES)) for w, e in ALL if metric_names(e) <= OURS]
    assert len(ours) >= len(ALL) - 3  # only Argo's and DCGM's are left out
    waiting = dict(ours)
    deadline = time.monotonic() + 20
    while waiting and time.monotonic() < deadline:
        for where, promql in list(waiting.items()):
            if _ask(prometheus, promql)["data"]["result"]:
                del waiting[where]
        time.sleep(0.25)
    assert not waiting, "no data:\n" + "\n".join(f"{w}: {q}" for w, q in waiting.items())
