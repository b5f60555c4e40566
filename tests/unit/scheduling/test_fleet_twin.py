"""The fleet twin (``gangway simulate --fleet … --workload …``): hand-made scenarios through
the platform's own decisions — preemption with checkpoints, reclaim down to a guarantee,
gangs that never fit — the invariant check catching broken decisions, the workloads, and a
short generated replay with its baselines (the month at scale: tests/bench/test_fleet_twin.py,
``-m benchmark``)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.scheduling.admission import Verdict
from gangway.scheduling.capacity import SnapshotView
from gangway.scheduling.simulation.twin import (
    Choice,
    GangOutcome,
    InvariantViolation,
    Start,
    TwinRun,
    TwinSettings,
    first_fit_decision,
    platform_decision,
    replay_twin,
)
from gangway.scheduling.simulation.twin_fleet import TwinFleet, twin_fleet
from gangway.scheduling.simulation.twin_workload import (
    TwinGang,
    generate_twin,
    read_openb,
    read_twin_gangs,
    twin_csv,
)
from gangway.scheduling.simulation.what_if import parse_what_if
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.workload import Workload

HOUR = 3600


def small_fleet(*, guarantee_a: int = 0) -> TwinFleet:
    """One cluster of 4 nodes × 8 H100 (2 racks of 2), teams a and b with half each."""
    b = (
        SnapshotBuilder()
        .priority("high", 1000)
        .priority("low", 10)
        .team("a", classes=["low", "high"])
        .team("b", classes=["low", "high"])
    )
    guarantee = {"gpu": guarantee_a} if guarantee_a else {}
    (
        b.cluster("c1", tiers=("rack", "block"))
        .racks(2, per_rack=2, gpu_type="H100")
        .queue("a", deserved={"gpu": 16}, guarantee=guarantee)
        .queue("b", deserved={"gpu": 16})
        .done()
    )
    return TwinFleet(b.build(), "test")


def gang(
    name: str, t: float, team: str = "a", pods: int = 1, gpus: int = 8, **kw: object
) -> TwinGang:
    hours = float(kw.pop("hours", 10))  # type: ignore[arg-type]
    return TwinGang(
        name,
        round(t * HOUR),
        team,
        pods,
        gpus,
        round(hours * HOUR),
        gpu_model="H100",
        **kw,  # type: ignore[arg-type]
    )


def settings(**kw: object) -> TwinSettings:
    return replace(TwinSettings(horizon_s=100 * HOUR), **kw)  # type: ignore[arg-type]


def by_name(run: TwinRun) -> dict[str, GangOutcome]:
    return {o.gang.name: o for o in run.outcomes}


def test_a_higher_priority_gang_preempts_and_the_victim_loses_work_since_its_checkpoint() -> None:
    fleet = small_fleet()
    gangs = [
        gang("sweep", 0, pods=4, priority_class="low", hours=10, checkpoint_s=HOUR),
        gang("urgent", 2.5, pods=2, priority_class="high", hours=1),
    ]
    run = replay_twin(fleet, gangs, settings())
    o = by_name(run)
    assert o["urgent"].first_start_s == 2.5 * HOUR and o["urgent"].wait_s == 0
    assert o["sweep"].preemptions == 1
    assert o["sweep"].lost_gpu_hours == pytest.approx(32 * 0.5)  # 30 min since the 2 h mark
    # it restarts when urgent leaves at 3.5 h with 8 h left: ends at 11.5 h
    assert o["sweep"].end_s == pytest.approx(11.5 * HOUR)


def test_without_checkpoints_a_victim_loses_everything_and_without_preemption_nobody_does() -> None:
    fleet = small_fleet()
    gangs = [
        gang("sweep", 0, pods=4, priority_class="low", hours=10, checkpoint_s=0),
        gang("urgent", 2.5, pods=2, priority_class="high", hours=1),
    ]
    o = by_name(replay_twin(fleet, gangs, settings()))
    assert o["sweep"].lost_gpu_hours == pytest.approx(32 * 2.5)
    o = by_name(replay_twin(fleet, gangs, settings(preemption=False)))
    assert o["sweep"].preemptions == 0 and o["urgent"].wait_s == 7.5 * HOUR


def test_a_queue_within_its_deserved_share_reclaims_from_one_over_it() -> None:
    fleet = small_fleet()
    gangs = [gang("a-big", 0, "a", pods=4, hours=10), gang("b-one", 1, "b", pods=1, hours=1)]
    o = by_name(replay_twin(fleet, gangs, settings()))
    assert o["b-one"].wait_s == 0 and o["a-big"].preemptions == 1


def test_reclaim_stops_at_the_guarantee() -> None:
    fleet = small_fleet(guarantee_a=32)  # a's whole holding is guaranteed
    gangs = [gang("a-big", 0, "a", pods=4, hours=10), gang("b-one", 1, "b", pods=1, hours=1)]
    o = by_name(replay_twin(fleet, gangs, settings()))
    assert o["a-big"].preemptions == 0 and o["b-one"].wait_s == 9 * HOUR


def test_a_gang_larger_than_any_domain_never_fits() -> None:
    fleet = small_fleet()
    gangs = [gang("huge", 0, pods=5), gang("rack-bound", 0, pods=3, within="rack")]
    o = by_name(replay_twin(fleet, gangs, settings()))
    assert o["huge"].never_fits and o["rack-bound"].never_fits
    assert o["huge"].first_start_s is None


def test_fifo_blocks_nothing_behind_a_waiting_gang_and_volcano_order_puts_priority_first() -> None:
    fleet = small_fleet()
    gangs = [
        gang("first", 0, pods=4, hours=2),
        gang("low", 1, pods=4, priority_class="low", hours=1),
        gang("high", 1.5, pods=4, priority_class="high", hours=1),
    ]
    volcano = by_name(replay_twin(fleet, gangs, settings(preemption=False)))
    assert volcano["high"].first_start_s == 2 * HOUR and volcano["low"].first_start_s == 3 * HOUR
    fifo = by_name(
        replay_twin(
            fleet, gangs, settings(order="fifo", decide=first_fit_decision, preemption=False)
        )
    )
    assert fifo["low"].first_start_s == 2 * HOUR and fifo["high"].first_start_s == 3 * HOUR


def _overcommit(w: Workload, fleet: SnapshotView) -> Choice:
    return Choice(Verdict.ADMIT, Start("c1", {0: w.pods}))  # every pod on node 0


def _split(w: Workload, fleet: SnapshotView) -> Choice:
    c = platform_decision(w, fleet)
    if c.start is None or w.pods < 2:
        return c
    first = next(iter(c.start.nodes))
    return Choice(c.verdict, Start(c.start.cluster, {first: 1}))  # one pod of the gang


def _reclaim_all(w: Workload, fleet: SnapshotView) -> Choice:
    view = fleet.clusters["c1"]
    victims = tuple(g for g in view.gangs.values() if g.phase == "Running")
    if not victims:
        return platform_decision(w, fleet)
    rows = {view.index[n]: k for g in victims for n, k in g.placement.items()}
    return Choice(Verdict.PREEMPT, Start("c1", dict(list(rows.items())[:1]), victims))


@pytest.mark.parametrize(
    ("decide", "message"),
    [
        pytest.param(_overcommit, "over-commits node", id="over-commit"),
        pytest.param(_split, "split gang", id="split-gang"),
        pytest.param(_reclaim_all, "below its guarantee", id="reclaim-below-guarantee"),
    ],
)
def test_the_invariant_check_catches_a_broken_decision(decide, message) -> None:  # type: ignore[no-untyped-def]
    fleet = small_fleet(guarantee_a=16)
    gangs = [gang("a1", 0, "a", pods=2), gang("a2", 0.5, "a", pods=1), gang("b1", 1, "b", pods=1)]
    with pytest.raises(InvariantViolation, match=message):
        replay_twin(fleet, gangs, settings(decide=decide))


def test_evicting_with_preemption_off_is_a_violation() -> None:
    fleet = small_fleet()
    gangs = [gang("a1", 0, "a", pods=1), gang("b1", 1, "b", pods=1)]
    with pytest.raises(InvariantViolation, match="preemption off"):
        replay_twin(fleet, gangs, settings(decide=_reclaim_all, preemption=False))


@pytest.fixture(scope="module")
def example():  # type: ignore[no-untyped-def]
    return twin_fleet("example")


def test_the_example_fleet_has_two_clusters_and_three_teams(example) -> None:  # type: ignore[no-untyped-def]
    assert example.gpus == {
        ("us-east", "H100"): 512,
        ("us-east", "A100"): 256,
        ("eu-west", "H100"): 256,
        ("eu-west", "A100"): 128,
    }
    assert example.teams == ("team-a", "team-b", "team-c")


def test_a_generated_workload_is_deterministic_and_round_trips(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gangs = generate_twin(example, load=1.0, hours=48, seed=7)
    assert gangs == generate_twin(example, load=1.0, hours=48, seed=7)
    assert gangs != generate_twin(example, load=1.0, hours=48, seed=8)
    assert {g.team for g in gangs} == {"team-a", "team-b", "team-c"}
    assert {g.gpu_model for g in gangs} == {"H100", "A100"}
    assert all(g.priority_class == "gangway-batch" for g in gangs if g.team == "team-c")
    assert all((g.within is None) == (g.pods == 1) for g in gangs)
    path = tmp_path / "w.csv"
    path.write_text(twin_csv(gangs))
    assert read_twin_gangs(path) == sorted(gangs, key=lambda g: g.arrival_s)


def test_a_workload_file_mistake_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("name,arrival_s,team,pods,gpus_per_pod,duration_s\ng1,0,,1,8,60\n")
    with pytest.raises(PermanentError, match=r"w.csv:2: column team"):
        read_twin_gangs(path)


def test_the_openb_trace_replays_on_its_own_clock(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "p0,1000,1024,1,1000,,LS,Running,0,7200,100\n"
        "p1,1000,1024,0,0,,BE,Running,10,500,10\n"
        "p2,1000,1024,2,1000,,BE,Running,50,,60\n"
        "p3,1000,1024,1,300,,Burstable,Running,70,100,70\n"
    )
    gangs = read_openb(path, example)
    assert [g.name for g in gangs] == ["p0", "p2", "p3"]  # the CPU pod is left out
    p0, p2, p3 = gangs
    assert (p0.arrival_s, p0.duration_s) == (0, 7100)
    assert p2.duration_s == 7200 - 60  # never deleted: until the trace's last timestamp
    assert p3.gpus_per_pod == 1
    high = {"team-a": "gangway-normal", "team-b": "gangway-high", "team-c": "gangway-batch"}
    assert p0.priority_class == high[p0.team]
    assert p2.priority_class == "gangway-batch"
    run = replay_twin(example, gangs, settings())
    assert all(o.first_start_s == o.gang.arrival_s for o in run.outcomes)


TRACE = os.environ.get("GANGWAY_TRACE_DIR")


@pytest.mark.skipif(not TRACE, reason="GANGWAY_TRACE_DIR is not set")
def test_two_days_of_the_real_openb_trace_replay_clean(example) -> None:  # type: ignore[no-untyped-def]
    trace = Path(str(TRACE)) / "openb_pod_list_default.csv"
    gangs = read_openb(trace, example, start_h=133 * 24, hours=48)  # the trace's busy end
    assert len(gangs) > 100
    run = replay_twin(example, gangs, settings(horizon_s=48 * HOUR))
    assert sum(o.first_start_s is not None for o in run.outcomes) > 100


def test_three_days_generated_replay_clean_and_deterministic_with_baselines(example) -> None:  # type: ignore[no-untyped-def]
    gangs = generate_twin(example, load=1.1, hours=72, seed=42)
    assert 300 < len(gangs) < 1500
    base = settings(horizon_s=72 * HOUR)
    twin = replay_twin(example, gangs, base)
    again = replay_twin(example, gangs, base)
    assert [(o.first_start_s, o.preemptions) for o in twin.outcomes] == [
        (o.first_start_s, o.preemptions) for o in again.outcomes
    ]
    no_preemption = replay_twin(example, gangs, replace(base, name="np", preemption=False))
    fifo = replay_twin(
        example,
        gangs,
        replace(base, name="fifo", order="fifo", decide=first_fit_decision, preemption=False),
    )
    assert sum(o.preemptions for o in no_preemption.outcomes) == 0
    assert sum(o.preemptions for o in fifo.outcomes) == 0
    assert sum(o.preemptions for o in twin.outcomes) > 0
    for run in (twin, no_preemption, fifo):
        started = sum(o.first_start_s is not None for o in run.outcomes)
        assert started > 0.8 * len(gangs)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("add-nodes=eu-wst:H100:16", "did you mean 'eu-west'", id="unknown-cluster"),
        pytest.param("add-nodes=eu-west:H100", "WHERE:MODEL:N", id="no-count"),
        pytest.param("deserved=team-x:+10%", "no team 'team-x'", id="unknown-team"),
        pytest.param("deserved=team-a:10", "TEAM:±P%", id="no-sign"),
        pytest.param("checkpoint-every=soon", "a duration", id="bad-duration"),
        pytest.param("add-node=eu-west:H100:16", "did you mean add-nodes", id="unknown-change"),
    ],
)
def test_a_wrong_what_if_says_what_to_write(example, raw: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PermanentError, match=message):
        parse_what_if(raw, example)


def test_what_ifs_change_the_fleet_or_the_gangs(example) -> None:  # type: ignore[no-untyped-def]
    more = parse_what_if("add-nodes=eu-west-1:H100:16", example).fleet(example)
    assert more.gpus[("eu-west", "H100")] == 256 + 128
    new = [n for n in more.snapshot.clusters["eu-west"].nodes if "whatif" in n.name]
    assert len({n.domains["rack"] for n in new}) == 2  # racks of 8, as the cluster's
    shifted = parse_what_if("deserved=team-a:-10%,team-b:+10%", example).fleet(example)
    q = shifted.snapshot.clusters["us-east"].queues
    assert (q["team-a"].deserved["gpu/H100"], q["team-b"].deserved["gpu/H100"]) == (230, 211)
    assert q["team-a"].guarantee == example.snapshot.clusters["us-east"].queues["team-a"].guarantee
    gangs = [gang("g", 0)]
    assert parse_what_if("checkpoint-every=30m", example).gangs(gangs)[0].checkpoint_s == 1800


def test_the_cli_writes_the_side_by_side_table_and_the_plot(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gangway.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--fleet",
            "example",
            "--workload",
            "generate",
            "--hours",
            "24",
            "--what-if",
            "add-nodes=eu-west:H100:16",
            "--what-if",
            "checkpoint-every=4h",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = (out / "twin_summary.md").read_text()
    for name in ("twin", "no preemption", "FIFO + first fit", "add-nodes=eu-west:H100:16"):
        assert f"| {name} |" in summary
    assert (out / "workload.csv").is_file() and (out / "twin_queues.csv").is_file()
    queues = (out / "twin_queues.csv").read_text().splitlines()
    assert queues[0].startswith("replay,queue,gangs,wait_p50_h")
