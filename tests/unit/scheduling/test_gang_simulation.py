"""Gangs over time on a fleet from a platform config (``gangway simulate --gangs``): the
published job-size mix, the replay's bookkeeping on hand-made scenarios, and one fast seed of
the benchmark (the full runs: tests/bench/test_gang_placement.py, ``-m benchmark``)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.scheduling.simulation.fleet import build_fleet, parse_layout
from gangway.scheduling.simulation.gang_report import gang_headlines
from gangway.scheduling.simulation.gang_workload import (
    SIZE_MIX,
    GangJob,
    check_jobs,
    gangs_csv,
    generate,
    read_gangs,
)
from gangway.scheduling.simulation.gangs import replay_gangs


@pytest.fixture(scope="module")
def fleet():  # type: ignore[no-untyped-def]
    return build_fleet("example", None, (8, 4))


def test_the_example_fleet_is_racks_and_blocks_of_whole_nodes(fleet) -> None:  # type: ignore[no-untyped-def]
    c = fleet.snapshot.clusters["train"]
    assert fleet.gpus == {"H100": 1024} and len(c.nodes) == 128
    assert fleet.tiers == ("rack", "block")
    assert c.nodes[8].domains == {"rack": "h100-rack1", "block": "h100-block0"}
    assert c.nodes[32].domains == {"rack": "h100-rack4", "block": "h100-block1"}


def test_the_mix_is_the_published_one() -> None:
    assert sum(c.share for c in SIZE_MIX) == pytest.approx(1.0)
    # Philly (via Gavel) up to one node, Helios's mean of 3.716 GPUs a job over all
    assert sum(c.share * c.gpus for c in SIZE_MIX) == pytest.approx(3.716, abs=0.01)
    small = {c.gpus: c.share for c in SIZE_MIX if c.gpus <= 8}
    total = sum(small.values())
    assert [round(small[g] / total, 2) for g in (1, 2, 4, 8)] == [0.70, 0.10, 0.15, 0.05]


def test_generated_gangs_follow_the_load_and_the_topology_rule(fleet) -> None:  # type: ignore[no-untyped-def]
    jobs = generate(fleet, load=1.0, hours=24 * 60, seed=7)
    assert jobs == generate(fleet, load=1.0, hours=24 * 60, seed=7)
    assert jobs != generate(fleet, load=1.0, hours=24 * 60, seed=8)
    offered = sum(j.gpus * j.duration_s for j in jobs) / (1024 * 24 * 60 * 3600)
    assert 0.8 < offered < 1.25, offered  # a heavy tail: loose on one draw of 60 days
    assert statistics.mean(j.gpus for j in jobs) == pytest.approx(3.7, abs=0.4)
    for j in jobs:
        assert (j.pods == 1) == (j.gpus <= 8)
        assert j.within == ("block" if j.pods > 1 else None)  # 128 GPUs fit a block of 256


def _job(name: str, t: int, pods: int, gpus: int, hours: float = 10, **kw: str) -> GangJob:
    return GangJob(name, t, pods, gpus, round(hours * 3600), **kw)  # type: ignore[arg-type]


def test_gangways_placement_takes_the_tightest_domain_and_binpack_the_first() -> None:
    small = build_fleet("example", None, (2, 2))  # 2 nodes a rack, 2 racks a block
    # rack0 loses one node to a long job; a 2-node gang then fits rack1 (tightest) — binpack
    # takes the first block's most-allocated nodes, across both racks
    jobs = [_job("a", 0, 1, 8), _job("b", 60, 2, 8, within="block")]
    runs = {p: replay_gangs(small, jobs, p, seed=1, horizon_s=3600) for p in ("gangway", "binpack")}
    g, b = runs["gangway"].records[1], runs["binpack"].records[1]
    assert (g.tier, g.tightest) == (0, 0)
    assert (b.tier, b.tightest) == (1, 0)


def test_a_gang_that_waits_with_gpus_free_is_counted_and_starts_when_room_comes() -> None:
    small = build_fleet("example", None, (2, 2))
    # a 7-GPU job on each of the 128 nodes: 128 GPUs free, none with a whole node; two 8-GPU
    # pods in one block must wait for those jobs to end
    ones = [_job(f"s{i}", 0, 1, 7, hours=1) for i in range(128)]
    big = _job("big", 10, 2, 8, within="block")
    run = replay_gangs(small, [*ones, big], "binpack", seed=1, horizon_s=7200)
    rec = run.records[-1]
    assert rec.waited_with_room and rec.across_domains is False  # pods fit no two free nodes
    assert rec.start_s == 3600 and rec.wait_s == 3590
    assert max(run.allocated) <= 1024 and min(run.allocated) >= 0


@pytest.mark.parametrize("policy", ["gangway", "binpack", "random"])
def test_one_seed_of_each_policy_never_overcommits_and_reports(fleet, policy: str) -> None:  # type: ignore[no-untyped-def]
    jobs = generate(fleet, load=1.0, hours=96, seed=42)
    run = replay_gangs(fleet, jobs, policy, seed=42, horizon_s=96 * 3600)
    assert all(0 <= a <= 1024 for a in run.allocated)
    started = [r for r in run.records if r.start_s is not None]
    assert len(started) > 0.9 * len(jobs)
    assert all(r.start_s >= r.job.arrival_s for r in started)  # type: ignore[operator]
    (h,) = gang_headlines([run])
    assert 50 < h.allocation <= 100
    if policy == "gangway":
        assert h.tightest == 100.0


def test_a_workload_file_round_trips_and_names_its_mistakes(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jobs = generate(fleet, load=0.5, hours=12, seed=3)
    path = tmp_path / "gangs.csv"
    path.write_text(gangs_csv(jobs))
    assert read_gangs(path) == jobs
    path.write_text("name,arrival_s,pods,gpus_per_pod,duration_s,within\na,0,2,8,60,rakc\n")
    with pytest.raises(
        PermanentError, match=r"gangs.csv:2: column within: 'rakc'.*did you mean 'rack'"
    ):
        check_jobs(str(path), read_gangs(path), fleet)
    path.write_text("name,arrival_s,pods,gpus_per_pod,duration_s\na,0,2,x,60\n")
    with pytest.raises(
        PermanentError, match=r"gangs.csv:2: column gpus_per_pod: 'x' is not a whole"
    ):
        read_gangs(path)
    path.write_text("name,arrival_s,pods,gpus_per_pod,duration_s\na,0,200,8,60\n")
    with pytest.raises(PermanentError, match="more than the fleet's 1024 H100"):
        check_jobs(str(path), read_gangs(path), fleet)


def test_a_bad_layout_or_fleet_is_one_line() -> None:
    with pytest.raises(PermanentError, match="--layout '8;4'"):
        parse_layout("8;4")
    with pytest.raises(PermanentError, match="--layout '0,4'"):
        parse_layout("0,4")
    with pytest.raises(PermanentError, match="no such file"):
        build_fleet("nowhere.yaml", None, (8, 4))
    with pytest.raises(PermanentError, match="did you mean 'train'"):
        build_fleet("example", "trian", (8, 4))


def test_gangs_arriving_after_the_horizon_are_left_out(fleet) -> None:  # type: ignore[no-untyped-def]
    jobs = [_job("early", 0, 1, 8, hours=1), _job("late", 7200, 1, 8, hours=1)]
    run = replay_gangs(fleet, jobs, "gangway", seed=1, horizon_s=3600)
    assert [r.job.name for r in run.records] == ["early"]
    (h,) = gang_headlines([run])
    assert h.not_started == 0 and h.wait_one[0] == 0.0
