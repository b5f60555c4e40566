from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from gangway.scheduling.admission import admit
from gangway.scheduling.capacity import SnapshotView, view_of
from gangway.scheduling.placement import place
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Amount, Gang, Snapshot
from gangway.scheduling.workload import Workload

pytestmark = pytest.mark.benchmark
CLASSES = {"low": 100, "mid": 1000, "high": 10000}
TEAMS = [f"t{k}{j}" for k in range(5) for j in range(6)]
PER_POD_GANG = {"cpu": "8", "memory": "64Gi"}


def _cluster(nodes: int) -> Snapshot:
    """The fleet, empty: ``nodes`` × 8 H100, 5 cohorts × 6 team queues."""
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


def _busy(nodes: int, fill: float = 0.95, seed: int = 5) -> Snapshot:
    """The fleet with running gangs of 1–2 pods × 1–8 GPUs (8 cores, 64Gi a pod) holding
    ``fill`` of its GPUs, each placed pod by pod from a random node on, in random team queues
    and classes, started 0.5–30 h ago, about half with a checkpoint in the last 2 h."""
    rng = random.Random(seed)
    snap = _cluster(nodes)
    state = snap.clusters["c"]
    free = [8] * nodes
    per_node = [[0, 0] for _ in range(nodes)]  # pods' cores and GiB on each node
    gangs: list[Gang] = []
    used, goal = 0, fill * nodes * 8
    while used < goal:
        pods, gpus = rng.choice([1, 1, 1, 2]), rng.choice([1, 1, 1, 2, 4, 8])
        start, chosen = rng.randrange(nodes), list[int]()
        for off in range(nodes):
            n = (start + off) % nodes
            while free[n] >= gpus and len(chosen) < pods:
                free[n] -= gpus
                chosen.append(n)
            if len(chosen) == pods:
                break
        if len(chosen) < pods:  # no room for this shape any more: try a smaller one
            for n in chosen:
                free[n] += gpus
            continue
        placement: dict[str, int] = {}
        for n in chosen:
            name = state.nodes[n].name
            placement[name] = placement.get(name, 0) + 1
            per_node[n][0] += 8
            per_node[n][1] += 64
        cls = rng.choice(list(CLASSES))
        started = snap.taken_at - _hours(rng.uniform(0.5, 30))
        ckpt = snap.taken_at - _hours(rng.uniform(0, 2)) if rng.random() < 0.5 else None
        gangs.append(
            Gang(
                name=f"g{len(gangs)}",
                queue=rng.choice(TEAMS),
                priority_class=cls,
                priority=CLASSES[cls],
                pods=pods,
                per_pod=Amount(gpus=gpus, **PER_POD_GANG),
                gpu_type="H100",
                phase="Running",
                placement=placement,
                started_at=started,
                last_checkpoint_at=ckpt,
            )
        )
        used += pods * gpus
    nodes_now = [
        n.model_copy(
            update={
                "allocated": Amount(
                    cpu=per_node[i][0], memory=f"{per_node[i][1]}Gi", gpus=8 - free[i]
                )
            }
        )
        for i, n in enumerate(state.nodes)
    ]
    state = state.model_copy(update={"nodes": nodes_now, "gangs": gangs})
    return snap.model_copy(update={"clusters": {"c": state}})


def _hours(h: float) -> timedelta:
    return timedelta(hours=h)


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
                team=rng.choice(TEAMS),
                priority_class=rng.choice(list(CLASSES)),
                gpu_type="H100",
                within=rng.choice([None, None, "rack", "block"]),
            )
        )
    return out


def _no_preemption(snap: Snapshot) -> Snapshot:
    classes = {
        k: v.model_copy(update={"preempting": False}) for k, v in snap.priority_classes.items()
    }
    return snap.model_copy(update={"priority_classes": classes})


def _decide(view: SnapshotView, load: list[Workload]) -> tuple[list[float], list[str]]:
    """Each workload decided over ``view`` as it is: milliseconds per decision, verdicts."""
    times, verdicts = [], []
    for w in load:
        t = time.perf_counter()
        d = admit(w, view)
        times.append((time.perf_counter() - t) * 1000)
        verdicts.append(str(d.verdict))
    return times, verdicts


def _p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def _line(name: str, times: list[float]) -> str:
    rate = len(times) / (sum(times) / 1000)
    return (
        f"{name}: {rate:,.0f} decisions/s, median {statistics.median(times):.3f} ms, "
        f"p99 {_p99(times):.3f} ms"
    )


def test_admission_throughput_on_a_busy_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    """Decisions per second over the busy fleet — preemption and reclaim planned for every gang
    that does not fit — beside, in the same run, the same load with no class allowed to
    preempt and over the empty fleet."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load = _workloads(2000)
    snap = _busy(1200)
    gpus = sum(n.allocatable.gpus for n in snap.clusters["c"].nodes)
    held = sum(n.allocated.gpus for n in snap.clusters["c"].nodes)
    busy_times, verdicts = _decide(view_of(snap), load)
    alone_times, _ = _decide(view_of(_no_preemption(snap)), load)
    empty_times, _ = _decide(view_of(_cluster(1200)), load)
    by_verdict: dict[str, list[float]] = defaultdict(list)
    for t, v in zip(busy_times, verdicts, strict=True):
        by_verdict[v].append(t)
    rate = len(load) / (sum(busy_times) / 1000)
    with capsys.disabled():
        print(
            f"\nbusy fleet: 1,200 nodes, {len(snap.clusters['c'].gangs):,} running gangs, "
            f"{held / gpus:.0%} of GPUs held; verdicts {dict(Counter(verdicts))}"
        )
        print(_line("  busy, preemption planned", busy_times) + " (goal ≥ 5,000/s)")
        for v, ts in sorted(by_verdict.items()):
            print(_line(f"    {v} ({len(ts)})", ts))
        print(_line("  busy, no class may preempt", alone_times))
        print(_line("  empty fleet", empty_times))
        alone = len(load) / (sum(alone_times) / 1000)
        empty = len(load) / (sum(empty_times) / 1000)
        print(f"  ratios: busy / no-preemption {rate / alone:.2f}, busy / empty {rate / empty:.2f}")
    assert held / gpus >= 0.94 and len(snap.clusters["c"].gangs) >= 2500
    counts = Counter(verdicts)
    assert counts["admit"] > 500 and counts["preempt"] > 100 and counts["wait"] > 100


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


def _latencies(load: list[Workload], fn: Callable[[Workload], object]) -> list[float]:
    out = []
    for w in load:
        t = time.perf_counter()
        fn(w)
        out.append((time.perf_counter() - t) * 1000)
    return out


@pytest.mark.parametrize(("nodes", "goal_ms"), [(1200, (0.5, 2.0)), (12_000, (None, 5.0))])
def test_placement_latency_on_a_busy_fleet(
    nodes: int, goal_ms: tuple[float | None, float], capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    snap = _busy(nodes)
    load = [replace(w, within=w.within or "block") for w in _workloads(400, seed=11)]
    view = view_of(snap)  # built once per snapshot, as a scheduler keeps it
    ours = _latencies(load, lambda w: place(w, view))
    naive = _latencies(load[:100], lambda w: _naive_assign(snap, w))
    med, p99, base = statistics.median(ours), _p99(ours), statistics.median(naive)
    median_goal, p99_goal = goal_ms
    goal = f"≤ {median_goal} ms median, " if median_goal else ""
    with capsys.disabled():
        print(
            f"\nplacement @ {nodes:,} busy nodes: median {med:.3f} ms, p99 {p99:.3f} ms "
            f"(goal {goal}≤ {p99_goal} ms p99); plain-Python baseline median {base:.3f} ms "
            f"(ratio {base / med:.1f}×)"
        )
    assert len(ours) == len(load)
