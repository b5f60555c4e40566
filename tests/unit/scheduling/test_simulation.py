"""The trace replay: reading the trace, the method's rules, calibration of the two baselines
against the FGD paper's published 10-seed means, and Gangway's rule against FGD's.

The trace tests read the Alibaba openb v2023 trace from ``GANGWAY_TRACE_DIR`` (CI points it at
the copy beside the checkout) and are skipped without it; the full 10-seed runs on every trace
are behind the benchmark marker (tests/bench/test_placement_quality.py)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.scheduling.simulation.arrivals import arrivals
from gangway.scheduling.simulation.policies import POLICIES, bestfit, random_fit
from gangway.scheduling.simulation.replay import Cluster, allocation_curve, replay
from gangway.scheduling.simulation.run import Workload, simulate
from gangway.scheduling.simulation.trace import read_nodes, read_pods
from tests.helpers.builders import PUBLISHED, small_trace, trace
from tests.helpers.builders import trace_node as _node
from tests.helpers.builders import trace_pod as _pod


def means(name: str, policy: str, seeds: range) -> tuple[float, float]:
    runs = simulate(trace(name), [policy], seeds)
    return statistics.mean(r.curve[100] for r in runs), statistics.mean(r.curve[130] for r in runs)


@pytest.mark.parametrize("policy", ["random", "bestfit"])
def test_one_seed_of_the_default_trace_lands_on_the_published_means(policy: str) -> None:
    at100, at130 = means("default", policy, range(42, 43))
    want100, want130 = PUBLISHED["default"][policy]
    assert abs(at100 - want100) <= 1.0 and abs(at130 - want130) <= 1.0, (at100, at130)


def test_one_seed_of_fgd_on_cpu250_lands_on_its_published_mean() -> None:
    """The calibration (docs/simulation.md): ties between nodes go to one random node order
    per seed, as the artifact's; by node index this seed was 91.31, 1.9 below."""
    at100, at130 = means("cpu250", "fgd", range(42, 43))
    want100, want130 = PUBLISHED["cpu250"]["fgd"]
    assert abs(at100 - want100) <= 0.7 and abs(at130 - want130) <= 0.7, (at100, at130)


def test_one_seed_of_gangways_rule_on_the_default_trace_passes_fgds_published_mean() -> None:
    at100, at130 = means("default", "gangway", range(42, 43))
    fgd100, fgd130 = PUBLISHED["default"]["fgd"]
    assert at100 >= fgd100 and at130 >= fgd130, (at100, at130)


FGD_GPUSPEC33 = (90.02, 94.74)
"""The calibrated FGD's 10-seed means on gpuspec33 at 100 % / 130 %, measured by
tests/bench/test_placement_quality.py (FGD takes over a minute a seed there: too slow for
the default suite, so one seed of the rule is held to its benchmark mean)."""


def test_one_seed_where_a_third_of_gpu_pods_are_pinned_gangways_rule_passes_fgd() -> None:
    """GPU models are a resource: with pods pinned as the FGD artifact's gpuspec files pin
    them (half to T4), the rule without scarcity fell 2.5 points below FGD at 100 %."""
    from dataclasses import replace

    from tests.bench.variants import variant

    base = trace("default")
    work = replace(base, pods=tuple(variant("gpuspec33", base.pods, base.nodes)))
    (run,) = simulate(work, ["gangway"], range(42, 43))
    assert run.curve[100] > FGD_GPUSPEC33[0] + 2 and run.curve[130] >= FGD_GPUSPEC33[1], run.curve


def test_no_policy_passes_the_packing_bound_and_gangways_rule_is_near_it() -> None:
    from gangway.scheduling.simulation.bound import allocation_bound, pods_until

    work = trace("default")
    (run,) = simulate(work, ["gangway"], range(42, 43))
    cap = work.capacity_gpus
    bound = allocation_bound(pods_until(arrivals(work.pods, seed=42, capacity_gpus=cap), cap), cap)
    assert 96.5 < bound < 97.5 and bound - 1.5 < run.curve[100] < bound, (bound, run.curve[100])


def test_the_packing_bound_is_exact_where_the_shares_pair_up() -> None:
    from gangway.scheduling.simulation.bound import allocation_bound

    sixes = [_pod(f"a{i}", 1, 600) for i in range(20)]
    assert allocation_bound(sixes, 10) == pytest.approx(60.0)  # one 600 per GPU, 400 idle
    fours = [_pod(f"b{i}", 1, 400) for i in range(10)]
    assert allocation_bound(sixes + fours, 10) == pytest.approx(100.0)  # 600 + 400 per GPU
    whole = [_pod("w", 4, 1000), _pod("cpu", 0, 0)]
    assert allocation_bound(whole + sixes, 10) == pytest.approx(76.0)  # 4 whole + 6 × 600


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
    out, cluster = replay(nodes, pods, random_fit, seed=1)
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


POD_HEAD = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (POD_HEAD + "x,1_000,1,1,500\n", ":2: column cpu_milli: '1_000' is not a whole number"),
        (POD_HEAD + "x,\uff11,1,1,500\n", ":2: column cpu_milli: '\uff11' is not a whole"),
        (POD_HEAD + "x,1,1,1,500\nx,2,1,1,500\n", ":3: column name: 'x' again (first on line 2)"),
        (POD_HEAD + "x,1,1,1,500,9\n", ":2: 6 fields but the header has 5"),
        ("name,cpu_milli,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "'cpu_milli' appears twice"),
    ],
    ids=["underscores", "full-width-digit", "duplicate-name", "extra-field", "duplicate-column"],
)
def test_a_pod_list_is_read_strictly(tmp_path: Path, content: str, says: str) -> None:
    p = tmp_path / "pods.csv"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(PermanentError) as e:
        read_pods(p)
    assert str(p) in str(e.value) and says in str(e.value)


def test_a_pod_list_saved_by_excel_reads_the_same(tmp_path: Path) -> None:
    p = tmp_path / "pods.csv"
    p.write_bytes(
        b"\xef\xbb\xbfname, cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\r\n"
        b"x,1000,1024,1,500, V100M16 | G2 \r\n\r\n"
    )
    (pod,) = read_pods(p)
    assert pod.cpu_milli == 1000 and pod.models == {"V100M16", "G2"} and pod.line == 2


def test_pods_no_node_could_take_are_named_with_the_column_at_fault() -> None:
    from gangway.scheduling.simulation.trace import never_fit

    nodes = [_node("a", 8, "V100", cpu=32000), _node("b", 2, "T4", cpu=96000)]
    pods = [
        _pod("ok", 1, 500, models="T4"),
        _pod("case", 1, 500, models="v100"),
        _pod("many", 4, 1000, models="T4"),
        _pod("cpu", 1, 1000, cpu=64000, models="V100"),
        _pod("together", 8, 1000, cpu=64000),
        _pod("cpu-only", 0, 0, cpu=200000),
    ]
    why = {p.name: w for p, w in never_fit(nodes, pods)}
    assert why == {
        "case": "gpu_spec: 'v100' names no node's model (they are T4, V100); did you mean V100?",
        "many": "num_gpu: 4, but the most on any node of model T4 is 2",
        "cpu": "cpu_milli: 64000, but the most on any node of model V100 is 32000",
        "together": "no node has its CPU, memory and GPUs together",
        "cpu-only": "cpu_milli: 200000, but the most on any node is 96000",
    }


def test_a_jump_past_several_points_holds_the_allocation_before_it() -> None:
    out, _ = replay([_node("a", 10)], [_pod("p", 1, 1000), _pod("q", 8, 1000)], bestfit, seed=1)
    curve = allocation_curve(out, capacity_gpus=10)
    assert curve[0] == 0.0 and curve[11] == 10.0 and curve[50] == 10.0 and curve[88] == 10.0
    assert curve[89] == curve[91] == 90.0 and all(c != c for c in curve[92:])


def test_a_mark_some_seed_never_reached_is_no_number_rather_than_a_flattering_one() -> None:
    from gangway.scheduling.simulation.report import headlines, summary_md

    nodes, _ = small_trace()
    pods = tuple(_pod(f"p{i}", 1, 1000) for i in range(10))
    runs = simulate(Workload(tuple(nodes), pods, tune=1.0), ["bestfit"], range(42, 44))
    assert all(math.isnan(r.curve[130]) and math.isnan(r.fragmented[130]) for r in runs)
    (h,) = headlines(runs)
    assert not math.isnan(h.at[100][0]) and all(math.isnan(v) for v in h.at[130])
    assert "— ± —" in summary_md(runs, title="t", about=[])


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


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_places_only_where_the_pod_fits(policy: str) -> None:
    nodes, pods = small_trace()
    cap = sum(n.gpus for n in nodes)
    arriving = arrivals(pods, seed=42, capacity_gpus=cap)
    out, cluster = replay(nodes, arriving, POLICIES[policy](pods), seed=42)
    assert (cluster.cpu >= 0).all() and (cluster.memory >= 0).all()
    assert (cluster.gpu_idle >= -1).all()
    v100 = [i for i, n in enumerate(nodes) if n.model == "V100"]
    assert cluster.used_milli() == out.used[-1] and len(out.arrived) == len(arriving)
    assert out.used[-1] <= cap * 1000 and out.failed > 0  # 1.3× the capacity arrived
    assert (cluster.gpu_idle[v100] < 1000).any()  # the V100-only pods went to V100s


def test_the_curve_is_nan_where_arrivals_never_got() -> None:
    out, _ = replay([_node("a", 2)], [_pod("p", 1, 1000)], random_fit, seed=1)
    curve = allocation_curve(out, capacity_gpus=2)
    assert curve[50] == 50.0 and all(c != c for c in curve[52:])  # NaN beyond 51 %


def test_fragmented_capacity_is_what_no_pod_of_the_mix_can_use() -> None:
    from gangway.scheduling.packing import Profile
    from gangway.scheduling.simulation.replay import fragmented_milli

    c = Cluster.of([_node("a", 2), _node("b", 1, cpu=4000)])
    c.place(_pod("s", 1, 900), 0, [0])  # a sliver of 100 beside a free GPU
    c.place(_pod("t", 0, 0, cpu=3500), 1, [])  # b's GPU is idle but its CPU is gone
    mix = Profile.of([_pod("w", 1, 1000).shape, _pod("h", 1, 500).shape])
    assert fragmented_milli(c, mix) == 100 + 1000
