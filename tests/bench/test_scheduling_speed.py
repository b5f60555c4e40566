"""Benchmark: admission throughput and placement latency (``make bench`` or ``-m benchmark``).

* **Admission**, a Kueue-like load: 15,000 gang workloads arrive at one cluster (1,200 nodes ×
  8 H100 in racks of 16, 4 racks a block) with 5 cohorts (org queues) × 6 team queues, three
  priority classes, gangs of 1–16 pods. Each arrival gets ``admit``; an admitted gang starts
  (its nodes and quota are held), and every 4th arrival the oldest running gang finishes, so
  the cluster stays busy and decisions mix admit, preempt and wait. Goal: ≥ 5,000 decisions/s
  on one core. Baseline in the same run: the same load where no class may preempt.
* **Placement latency**: ``place`` for one gang over 1,200 and 12,000 nodes, median and p99.
  Goals: ≤ 0.5 ms and ≤ 5 ms.
* **Baseline, same run**: the same whole-gang, closest-tier-first, best-fit placement written
  as a plain Python loop over the nodes; the ratio says what the array form buys.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter, deque
from dataclasses import replace

import pytest

from gangway.scheduling.admission import Verdict, admit
from gangway.scheduling.capacity import view_of
from gangway.scheduling.placement import place
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Amount, Gang, Snapshot
from gangway.scheduling.workload import Workload

pytestmark = pytest.mark.benchmark
CLASSES = {"low": 100, "mid": 1000, "high": 10000}


def _cluster(nodes: int) -> Snapshot:
    b = SnapshotBuilder()
    for name, value in CLASSES.items():
        b.priority(name, value)
    c = b.cluster("c").racks(nodes // 16, per_rack=16, racks_per_block=4, prefix="n")
    total = nodes * 8
    for k in range(5):
        c.queue(f"cohort{k}", deserved={"gpu": total // 5}, capability={"gpu": total})
        for j in range(6):
            team = f"t{k}{j}"
            b.team(team, classes=list(CLASSES))
            c.queue(
                team,
                parent=f"cohort{k}",
                guarantee={"gpu": total // 120},
                deserved={"gpu": total // 30},
                capability={"gpu": total // 10},
            )
    return b.build()


def _workloads(n: int, seed: int = 7) -> list[Workload]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pods = rng.choice([1, 1, 2, 4, 8, 16])
        out.append(
            Workload(
                name=f"w{i}",
                pods=pods,
                per_pod=Amount(cpu=8, memory="64Gi", gpus=rng.choice([1, 2, 4, 8])),
                team=f"t{rng.randrange(5)}{rng.randrange(6)}",
                priority_class=rng.choice(list(CLASSES)),
                gpu_type="H100",
                within=rng.choice([None, None, "rack", "block"]),
            )
        )
    return out


def _run_admission(snap: Snapshot, load: list[Workload]) -> tuple[float, Counter[str]]:
    view = view_of(snap).clusters["c"]
    running: deque[Gang] = deque()
    verdicts: Counter[str] = Counter()
    start = time.perf_counter()
    for i, w in enumerate(load):
        d = admit(w, snap)
        verdicts[str(d.verdict)] += 1
        if d.verdict == Verdict.ADMIT:
            a = d.clusters[0].assignment
            assert a is not None
            g = Gang(
                name=w.name,
                queue=str(d.workload.queue),
                pods=w.pods,
                per_pod=w.per_pod,
                gpu_type=w.gpu_type,
                priority=CLASSES[str(d.workload.priority_class)],
                priority_class=d.workload.priority_class,
            )
            running.append(view.hold(g, a.nodes))
        if i % 4 == 3 and running:
            view.release(running.popleft())
    return time.perf_counter() - start, verdicts


def test_admission_throughput_on_a_kueue_like_load(capsys: pytest.CaptureFixture[str]) -> None:
    """Decisions per second with preemption planned for every gang that does not fit, and —
    the baseline in the same run — for the same load where no class may preempt."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load = _workloads(15_000)
    seconds, verdicts = _run_admission(_cluster(1200), load)
    never = _cluster(1200)  # the same load where no class may preempt: admission alone
    never = never.model_copy(
        update={
            "priority_classes": {
                k: v.model_copy(update={"preempting": False})
                for k, v in never.priority_classes.items()
            }
        }
    )
    alone, _ = _run_admission(never, load)
    rate, rate_alone = len(load) / seconds, len(load) / alone
    with capsys.disabled():
        print(
            f"\nadmission: {len(load)} decisions in {seconds:.2f} s = {rate:,.0f}/s with "
            f"preemption planned (goal ≥ 5,000/s); verdicts {dict(verdicts)}; "
            f"without preemption {rate_alone:,.0f}/s ({rate_alone / rate:.1f}× faster)"
        )
    assert verdicts["admit"] > 1000 and verdicts["wait"] + verdicts["preempt"] > 1000
    assert rate >= 5000 and rate_alone >= 5000


def _naive_assign(snap: Snapshot, w: Workload) -> dict[str, int] | None:
    """The baseline: the same rule over plain Python lists (closest tier first, best fit)."""
    c = snap.clusters["c"]
    slots = {}
    for n in c.nodes:
        if n.gpu_type != w.gpu_type or not n.schedulable:
            continue
        free = (
            n.allocatable.cpu - n.allocated.cpu,
            n.allocatable.memory - n.allocated.memory,
            n.allocatable.gpus - n.allocated.gpus,
        )
        want = (w.per_pod.cpu, w.per_pod.memory, w.per_pod.gpus)
        k = min(f // x for f, x in zip(free, want, strict=True) if x)
        if k > 0:
            slots[n.name] = (k, n.domains)
    for tier in c.tiers:
        cap: dict[str, int] = {}
        for k, doms in slots.values():
            cap[doms[tier]] = cap.get(doms[tier], 0) + k
        fits = [(v - w.pods, d) for d, v in cap.items() if v >= w.pods]
        if fits:
            _, best = min(fits)
            members = sorted(
                ((k, name) for name, (k, doms) in slots.items() if doms[tier] == best),
                key=lambda kn: (-kn[0], kn[1]),
            )
            out, left = {}, w.pods
            for k, name in members:
                if left <= 0:
                    break
                out[name] = min(k, left)
                left -= out[name]
            return out
    return None


def _latencies(snap: Snapshot, load: list[Workload], fn: object) -> list[float]:
    out = []
    for w in load:
        t = time.perf_counter()
        fn(w)  # type: ignore[operator]
        out.append((time.perf_counter() - t) * 1000)
    return out


@pytest.mark.parametrize(("nodes", "goal_ms"), [(1200, 0.5), (12_000, 5.0)])
def test_placement_latency(nodes: int, goal_ms: float, capsys: pytest.CaptureFixture[str]) -> None:
    snap = _cluster(nodes)
    c = snap.clusters["c"]
    busy = [n.model_copy(update={"allocated": Amount(cpu=8, memory="64Gi", gpus=(i * 7) % 9)})
            for i, n in enumerate(c.nodes)]  # fmt: skip
    snap = snap.model_copy(update={"clusters": {"c": c.model_copy(update={"nodes": busy})}})
    load = [replace(w, within=w.within or "block") for w in _workloads(400, seed=11)]
    view = view_of(snap)  # built once per snapshot, as a scheduler keeps it
    ours = _latencies(snap, load, lambda w: place(w, view))
    naive = _latencies(snap, load[:100], lambda w: _naive_assign(snap, w))
    med, p99 = statistics.median(ours), statistics.quantiles(ours, n=100)[98]
    base = statistics.median(naive)
    with capsys.disabled():
        print(
            f"\nplacement @ {nodes} nodes: median {med:.3f} ms, p99 {p99:.3f} ms "
            f"(goal ≤ {goal_ms} ms); plain-Python baseline median {base:.3f} ms "
            f"(ratio {base / med:.1f}×)"
        )
    assert med <= goal_ms
