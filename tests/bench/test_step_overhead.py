"""Benchmark: per-step overhead of ``gangway run`` vs kfp.local and Metaflow's local run, and
what recording lineage adds to a trivial step — lean (the step only spools; ``gangway run``
replays in the background) against eager (each step imports MLflow and replays itself).

Each tool runs an equivalent linear pipeline of trivial Python steps, as a user would run it
(a fresh process per run). Per-step overhead = (T(k+3) − T(k)) / 3 from medians over rounds
that alternate the tools, so start-up costs cancel: k = 1 for gangway, kfp and a bare
interpreter loop; k = 2 for Metaflow (a flow needs ``start`` and ``end``). kfp and Metaflow are
installed in a separate environment (``.bench-venv``, created on first use) so they never mix
with the project's dependencies. Run with ``make bench``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.benchmark
ROUNDS = 7
BENCH_VENV = REPO / ".bench-venv"
PEERS = ["kfp==2.17.3", "metaflow==2.19.39"]


def _peer_python() -> Path | None:
    py = BENCH_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        res = subprocess.run([str(py), "-m", "pip", "install", "-q", *PEERS], check=False)
        if res.returncode != 0:
            shutil.rmtree(BENCH_VENV, ignore_errors=True)
            return None
    return py


def _chain(n: int, template: str, description: str) -> str:
    """A pipeline of ``n`` tasks in a row, each running the template ``template`` (Python
    code defining the variable ``step_t``)."""
    tasks = "\n".join(
        f"        t{i} = Task(name='s{i}', template=step_t)"
        + (f"\n        t{i - 1} >> t{i}" if i else "")
        for i in range(n)
    )
    return (
        "from hera.workflows import DAG, Container, Task\n"
        "from gangway.pipeline import pipeline, step\n"
        f"with pipeline('chain', team='research', title='chain', description={description!r},"
        " parameters={}) as w:\n"
        f"    step_t = {template}\n"
        "    with DAG(name='main'):\n" + tasks + "\n"
    )


def _gangway_pipeline(n: int) -> str:
    noop = (
        "Container(name='noop', image='{{workflow.parameters.image}}',"
        " command=['python', '-c', 'pass'])"
    )
    return _chain(n, noop, "trivial")


TRACKED_STEP = (
    "import os, sys\n"
    "if sys.argv[1:] == ['eager']:  # the step sends its own lineage (the old design)\n"
    "    os.environ.pop('GANGWAY_LINEAGE_REPLAY', None)\n"
    "from gangway.step.tracking import StepTracker\n"
    "with StepTracker() as t:\n"
    "    t.log_params({'shard': 1})\n"
    "    t.log_metric('rows', 100.0)\n"
)
"""A trivial step that records lineage (a param and a metric), as every Gangway step does."""


def _tracked_pipeline(n: int, mode: str) -> str:
    """``n`` trivial lineage-tracked steps; ``mode`` ``lean`` (spool only, as pipelines run
    them) or ``eager`` (each step imports MLflow and replays, as before)."""
    return _chain(n, f"step('tracked', module='tracked_step', args=[{mode!r}])", "tracked")


def _kfp_pipeline(n: int, lean: bool) -> str:
    deco = "@dsl.component(install_kfp_package=False)" if lean else "@dsl.component"
    return (
        "import sys\nfrom kfp import dsl, local\n"
        "local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=sys.argv[1])\n"
        f"{deco}\ndef noop(x: int) -> int:\n    return x\n"
        f"@dsl.pipeline\ndef p() -> int:\n    t = noop(x=1)\n"
        f"    for _ in range({n - 1}):\n        t = noop(x=t.output)\n    return t.output\n"
        "p()\n"
    )


def _metaflow_flow(n: int) -> str:
    names = ["start"] + [f"s{i}" for i in range(1, n - 1)] + ["end"]
    body = ""
    for a, b in zip(names, [*names[1:], None], strict=True):
        nxt = f"self.next(self.{b})" if b else "pass"
        body += f"    @step\n    def {a}(self):\n        {nxt}\n\n"
    return (
        "from metaflow import FlowSpec, step\n\n\nclass Chain(FlowSpec):\n"
        + body
        + "\nif __name__ == '__main__':\n    Chain()\n"
    )


def _time(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return elapsed


def test_per_step_overhead(tmp_path: Path) -> None:
    gangway = [sys.executable, "-c", "from gangway.cli import main; main()"]
    runs: dict[str, tuple[int, Callable[[int], float]]] = {}
    for n in (1, 4):
        (tmp_path / f"gw{n}.py").write_text(_gangway_pipeline(n))
    runs["gangway run"] = (
        1,
        lambda n: _time(
            [*gangway, "run", str(tmp_path / f"gw{n}.py"), "--state-dir", str(tmp_path / "st")],
            tmp_path,
        ),
    )
    (tmp_path / "tracked_step.py").write_text(TRACKED_STEP)

    def tracked(mode: str) -> Callable[[int], float]:
        def one(n: int) -> float:
            pipeline, state = tmp_path / f"gw-{mode}{n}.py", tmp_path / f"st-{mode}"
            return _time([*gangway, "run", str(pipeline), "--state-dir", str(state)], tmp_path)

        return one

    for mode in ("lean", "eager"):
        for n in (1, 4):
            (tmp_path / f"gw-{mode}{n}.py").write_text(_tracked_pipeline(n, mode))
        runs[f"gangway run, lineage tracked ({mode})"] = (1, tracked(mode))
    runs["bare interpreter"] = (
        1,
        lambda n: _time(
            ["bash", "-c", f"for i in $(seq {n}); do {sys.executable} -c pass; done"], tmp_path
        ),
    )
    peer = _peer_python()
    if peer is not None:
        for n in (1, 4):
            (tmp_path / f"kfp{n}.py").write_text(_kfp_pipeline(n, lean=False))
            (tmp_path / f"kfplean{n}.py").write_text(_kfp_pipeline(n, lean=True))
        for n in (2, 5):
            (tmp_path / f"mf{n}.py").write_text(_metaflow_flow(n))
        root = str(tmp_path / "kfp-root")
        runs["kfp.local (as shipped)"] = (
            1,
            lambda n: _time([str(peer), str(tmp_path / f"kfp{n}.py"), root], tmp_path),
        )
        runs["kfp.local (install_kfp_package=False)"] = (
            1,
            lambda n: _time([str(peer), str(tmp_path / f"kfplean{n}.py"), root], tmp_path),
        )
        runs["metaflow run"] = (
            2,
            lambda n: _time(
                [str(peer), str(tmp_path / f"mf{n}.py"), "--quiet", "run"],
                tmp_path,
                {"USERNAME": "bench", "METAFLOW_HOME": str(tmp_path / "mf-home")},
            ),
        )
    samples: dict[str, dict[int, list[float]]] = {k: {} for k in runs}
    for _ in range(ROUNDS):
        for name, (k, fn) in runs.items():
            for n in (k, k + 3):
                samples[name].setdefault(n, []).append(fn(n))
    report = {}
    for name, (k, _) in runs.items():
        lo = statistics.median(samples[name][k])
        hi = statistics.median(samples[name][k + 3])
        report[name] = {
            "per_step_ms": round((hi - lo) / 3 * 1000, 1),
            f"T{k}_s": round(lo, 3),
            f"T{k + 3}_s": round(hi, 3),
        }
    print(f"\nper-step overhead (median of {ROUNDS} rounds):")
    for name, r in sorted(report.items(), key=lambda kv: kv[1]["per_step_ms"]):
        print(f"  {name:<40} {r['per_step_ms']:>7.1f} ms/step   {r}")
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "step_overhead.json").write_text(json.dumps(report, indent=2) + "\n")
    assert report["gangway run"]["per_step_ms"] < 1000
    # The goal: lineage costs a trivial step at most 0.5 s more than no lineage.
    lean = report["gangway run, lineage tracked (lean)"]["per_step_ms"]
    assert lean - report["gangway run"]["per_step_ms"] <= 500, report
