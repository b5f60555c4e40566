"""The trace replay: reading the trace, the method's rules, and calibration of the two
baselines against the FGD paper's published 10-seed means.

The calibration tests read the Alibaba openb v2023 trace from ``GANGWAY_TRACE_DIR`` (CI points
it at the copy beside the checkout) and are skipped without it."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.simulation.arrivals import arrivals
from gangway.simulation.policies import POLICIES, bestfit
from gangway.simulation.replay import Cluster, allocation_curve, replay
from gangway.simulation.trace import TraceNode, TracePod, read_nodes, read_pods

PUBLISHED = {  # trace → policy → (at 100 %, at 130 %), 10-seed means (seeds 42..51)
    "default": {"random": (86.30, 87.47), "bestfit": (92.86, 93.08)},
    "gpushare100": {"random": (78.90, 79.44), "bestfit": (84.62, 85.01)},
    "cpu250": {"random": (80.00, 80.42), "bestfit": (91.21, 91.45)},
    "multigpu20": {"random": (86.92, 88.69), "bestfit": (93.73, 93.93)},
}


def _trace_dir() -> Path:
    where = os.environ.get("GANGWAY_TRACE_DIR")
    if not where:
        pytest.skip("set GANGWAY_TRACE_DIR to the Alibaba openb v2023 trace to calibrate")
    return Path(where)


def _means(trace: str, policy: str, seeds: range) -> tuple[float, float]:
    d = _trace_dir()
    nodes = read_nodes(d / "openb_node_list_gpu_node.csv")
    pods = read_pods(d / f"openb_pod_list_{trace}.csv")
    cap = sum(n.gpus for n in nodes)
    at100, at130 = [], []
    for seed in seeds:
        out, _ = replay(
            nodes, arrivals(pods, seed=seed, capacity_gpus=cap), POLICIES[policy], seed=seed
        )
        curve = allocation_curve(out, cap)
        at100.append(curve[100])
        at130.append(curve[130])
    return statistics.mean(at100), statistics.mean(at130)


@pytest.mark.parametrize("policy", ["random", "bestfit"])
def test_one_seed_of_the_default_trace_lands_on_the_published_means(policy: str) -> None:
    at100, at130 = _means("default", policy, range(42, 43))
    want100, want130 = PUBLISHED["default"][policy]
    assert abs(at100 - want100) <= 1.0 and abs(at130 - want130) <= 1.0, (at100, at130)


@pytest.mark.benchmark
@pytest.mark.parametrize("trace", sorted(PUBLISHED))
@pytest.mark.parametrize("policy", ["random", "bestfit"])
def test_calibration_ten_seeds_every_trace(trace: str, policy: str) -> None:
    at100, at130 = _means(trace, policy, range(42, 52))
    want100, want130 = PUBLISHED[trace][policy]
    print(f"\n{trace} {policy}: {at100:.2f} / {at130:.2f} (published {want100} / {want130})")
    assert abs(at100 - want100) <= 1.0 and abs(at130 - want130) <= 1.0


def _node(name: str, gpus: int, model: str = "T4", cpu: int = 64000) -> TraceNode:
    return TraceNode(name, cpu, 262144, gpus, model)


def _pod(name: str, num_gpu: int, milli: int, cpu: int = 1000, models: str = "") -> TracePod:
    spec = frozenset(m for m in models.split("|") if m)
    return TracePod(name, cpu, 1024, num_gpu, milli if num_gpu else 0, spec)


def test_the_method_rules_for_shared_whole_and_multi_gpu_pods() -> None:
    c = Cluster.of([_node("a", 2), _node("b", 1, model="V100")])
    c.place(_pod("s", 1, 600), 0, [0])  # node a: GPU0 has 400 idle, GPU1 1000
    assert list(c.feasible(_pod("x", 1, 400))) == [True, True]
    assert list(c.feasible(_pod("w", 1, 1000))) == [True, True]  # a whole GPU: a's GPU1
    assert list(c.feasible(_pod("m", 2, 1000))) == [False, False]  # two fully free: none
    assert list(c.feasible(_pod("v", 1, 100, models="V100"))) == [False, True]
    assert list(c.feasible(_pod("cpu", 0, 0, cpu=64000))) == [False, True]
    assert c.used_milli() == 600


def test_bestfit_packs_a_shared_pod_onto_the_least_idle_gpu() -> None:
    import numpy as np

    c = Cluster.of([_node("a", 2)])
    c.place(_pod("s", 1, 600), 0, [1])
    pod = _pod("t", 1, 300)
    choice = bestfit(c, pod, c.feasible(pod), np.random.default_rng(0))
    assert choice == type(choice)(0, (1,))


def test_a_replay_drops_what_fits_nowhere_and_records_every_attempt() -> None:
    nodes = [_node("a", 1)]
    pods = [_pod("p1", 1, 1000), _pod("p2", 1, 500), _pod("p3", 0, 0)]
    out, cluster = replay(nodes, pods, POLICIES["random"], seed=1)
    assert cluster.used_milli() == 1000
    assert out.arrived == [1000, 1500, 1500] and out.used == [1000, 1000, 1000]
    assert out.failed == 1 and out.failed_gpu_pods == 1
    curve = allocation_curve(out, capacity_gpus=1, top=150)
    assert curve[100] == 100.0 and curve[150] == 100.0


def test_arrivals_are_deterministic_and_stop_at_the_tuned_demand() -> None:
    pods = [_pod(f"p{i:02d}", 1, 500) for i in range(10)]
    a = arrivals(pods, seed=7, capacity_gpus=10, tune=1.3)
    assert a == arrivals(pods, seed=7, capacity_gpus=10, tune=1.3)
    assert a != arrivals(pods, seed=8, capacity_gpus=10, tune=1.3)
    assert sorted(p.name for p in a[:10]) == [p.name for p in pods]
    assert sum(p.total_milli for p in a) <= 13000 < sum(p.total_milli for p in a) + 500


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("sn,cpu_milli,memory_mib,gpu\nn1,1,1,1\n", ":1: missing column(s) model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,abc,1,1,T4\n", ":2: column cpu_milli: 'abc'"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,\n", ":2: column model: empty"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,-2,T4\n", ":2: column gpu: -2 is not in"),
        ("sn,cpu_milli,memory_mib,gpu,model\n", "no rows after the header"),
    ],
    ids=["missing-column", "not-a-number", "gpus-without-model", "negative", "empty"],
)
def test_a_bad_node_list_names_file_line_and_column(
    tmp_path: Path, content: str, says: str
) -> None:
    p = tmp_path / "nodes.csv"
    p.write_text(content)
    with pytest.raises(PermanentError) as e:
        read_nodes(p)
    assert str(p) in str(e.value) and says in str(e.value)


def test_a_bad_pod_list_names_file_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "pods.csv"
    p.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1,1,0\n")
    with pytest.raises(PermanentError, match=r"pods.csv:2: column gpu_milli: 0 for a pod"):
        read_pods(p)
    p.write_bytes(b"name,cpu_milli\n\xff\xfe\n")
    with pytest.raises(PermanentError, match=r"missing column|not UTF-8"):
        read_pods(p)
    with pytest.raises(PermanentError, match="cannot read it"):
        read_pods(tmp_path / "missing.csv")
