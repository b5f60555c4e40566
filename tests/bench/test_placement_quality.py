"""Benchmark: placement quality on the Alibaba openb v2023 trace (``make bench``,
``-m benchmark``), by the method of docs/simulation.md, and the time one placement takes.

* **Published traces**: 10 seeds of each of the four pod lists for random, bestfit, gangway
  and fgd. The baselines must land within ±1 point of the published 10-seed means, and
  Gangway's rule at or above FGD's published mean, at 100 % and at 130 % arrived demand.
  Each trace's allocation.csv, summary.md and allocation.png go to
  ``bench-results/placement-quality/TRACE/``.
  Beside them, the upper bound no placement can pass (:mod:`gangway.scheduling.simulation.bound`).
* **Variants not in the trace set** (tests/bench/variants.py), 3 seeds each: Gangway's rule
  against this re-implementation of FGD and against bestfit, run in the same process.
* **Latency per pod** at 1,213 nodes (the trace's) and 12,130 (its nodes ten times over), on
  a cluster 90 % full: Gangway's rule against the bestfit baseline on the same states.

Reads the trace from ``GANGWAY_TRACE_DIR``; skipped without it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gangway.scheduling.simulation.arrivals import arrivals
from gangway.scheduling.simulation.bound import allocation_bound, pods_until
from gangway.scheduling.simulation.policies import POLICIES
from gangway.scheduling.simulation.replay import Cluster
from gangway.scheduling.simulation.report import headlines, write_outputs
from gangway.scheduling.simulation.run import MARKS, Workload, simulate
from gangway.scheduling.simulation.trace import TracePod
from tests.bench.variants import VARIANTS, variant
from tests.helpers.builders import PUBLISHED, trace

pytestmark = pytest.mark.benchmark
RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "placement-quality"
SEEDS = range(42, 52)


def _record(name: str, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Print ``line`` and keep it in bench-results/placement-quality/NAME.txt."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / f"{name}.txt").open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    with capsys.disabled():
        print("\n" + line, end="")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_ten_seeds_of_every_published_trace(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    work = trace(name)
    runs = simulate(work, ["random", "bestfit", "gangway", "fgd"], SEEDS, jobs=2)
    about = [f"trace: openb_pod_list_{name}.csv, 10 seeds", "published: " + str(PUBLISHED[name])]
    write_outputs(RESULTS / name, runs, title=f"openb {name}", about=about, with_plot=True)
    got = {h.policy: (h.at[100][0], h.at[130][0]) for h in headlines(runs)}
    for h in headlines(runs):
        line = (
            f"{name:12s} {h.policy:8s} {h.at[100][0]:6.2f} ± {h.at[100][1]:.2f} / "
            f"{h.at[130][0]:6.2f} ± {h.at[130][1]:.2f}  published {PUBLISHED[name].get(h.policy)}"
            f"  failed {h.failed:.0f}  fragmented {h.fragmented[100]:.2f} / "
            f"{h.fragmented[130]:.2f} %  {h.micros_per_pod:.0f} µs/pod"
        )
        _record("traces", line, capsys)
    bounds = [allocation_bound(_at_100(work, s), work.capacity_gpus) for s in SEEDS]
    _record(
        "traces",
        f"{name:12s} bound    {statistics.mean(bounds):6.2f} at 100 % (LP relaxation of packing "
        f"the shares, any policy, offline; min {min(bounds):.2f})",
        capsys,
    )
    assert got["gangway"][0] <= statistics.mean(bounds)
    for policy in ("random", "bestfit"):
        for i in range(len(MARKS)):
            assert abs(got[policy][i] - PUBLISHED[name][policy][i]) <= 1.0, (policy, got)
    for i in range(len(MARKS)):
        assert got["gangway"][i] >= PUBLISHED[name]["fgd"][i], got
    assert abs(got["fgd"][0] - PUBLISHED[name]["fgd"][0]) <= 0.3, got  # FGD calibrated


def _at_100(work: Workload, seed: int) -> list[TracePod]:
    cap = work.capacity_gpus
    return pods_until(arrivals(work.pods, seed=seed, capacity_gpus=cap, tune=work.tune), cap)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_not_in_the_trace_set(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = trace("default")
    work = replace(base, pods=tuple(variant(name, base.pods, base.nodes)))
    runs = simulate(work, ["bestfit", "gangway", "fgd"], range(42, 45), jobs=2)
    got = {h.policy: h.at[100][0] for h in headlines(runs)}
    late = {h.policy: h.at[130][0] for h in headlines(runs)}
    line = (
        f"{name:11s} at 100 %: bestfit {got['bestfit']:.2f}  fgd {got['fgd']:.2f}  "
        f"gangway {got['gangway']:.2f} ({got['gangway'] - got['fgd']:+.2f}); at 130 %: "
        f"bestfit {late['bestfit']:.2f}  fgd {late['fgd']:.2f}  gangway {late['gangway']:.2f}"
    )
    _record("variants", line, capsys)
    assert got["gangway"] >= got["fgd"] and got["gangway"] > got["bestfit"]


def _busy(work: Workload, fill: float) -> tuple[Cluster, list[TracePod]]:
    """The cluster once gangway's rule has placed ``fill`` of the capacity, and what comes
    next."""
    cap = work.capacity_gpus
    pods = arrivals(work.pods, seed=42, capacity_gpus=cap)
    policy = POLICIES["gangway"](work.pods)
    cluster, rng, used = Cluster.of(work.nodes), np.random.default_rng(42), 0
    for i, pod in enumerate(pods):
        ok = cluster.feasible(pod)
        if ok.any():
            c = policy(cluster, pod, ok, rng)
            cluster.place(pod, c.node, c.gpus)
            used += pod.total_milli
        if used >= fill * cap * 1000:
            return cluster, pods[i + 1 :]
    return cluster, []


def _tile(cluster: Cluster, times: int) -> Cluster:
    return Cluster(
        cpu=np.tile(cluster.cpu, times),
        memory=np.tile(cluster.memory, times),
        gpu_idle=np.tile(cluster.gpu_idle, (times, 1)),
        model=np.tile(cluster.model, times),
        models=cluster.models,
        capacity_gpus=cluster.capacity_gpus * times,
    )


def _per_pod_ms(policy: str, work: Workload, start: Cluster, pods: list[TracePod]) -> list[float]:
    """Milliseconds to place each of ``pods`` on a copy of ``start`` (placing it)."""
    cluster = _tile(start, 1)
    choose, rng, out = POLICIES[policy](work.pods), np.random.default_rng(0), []
    for pod in pods:
        ok = cluster.feasible(pod)
        if not ok.any():
            continue
        t = time.perf_counter()
        c = choose(cluster, pod, ok, rng)
        out.append((time.perf_counter() - t) * 1000)
        cluster.place(pod, c.node, c.gpus)
    return out


@pytest.mark.parametrize("times", [1, 10])
def test_latency_per_pod(times: int, capsys: pytest.CaptureFixture[str]) -> None:
    work = trace("default")
    busy, rest = _busy(work, 0.9)
    start = _tile(busy, times)
    pods = (rest * times)[:400]
    ours = _per_pod_ms("gangway", work, start, pods)
    base = _per_pod_ms("bestfit", work, start, pods)
    med, p99 = statistics.median(ours), statistics.quantiles(ours, n=100)[98]
    bmed = statistics.median(base)
    line = (
        f"placement of one pod @ {len(start.cpu)} nodes, 90 % full: gangway median "
        f"{med:.3f} ms, p99 {p99:.3f} ms; bestfit median {bmed:.3f} ms "
        f"(gangway takes {med / bmed:.1f}× as long)"
    )
    _record("latency", line, capsys)
    assert len(ours) == len(base) > 100
