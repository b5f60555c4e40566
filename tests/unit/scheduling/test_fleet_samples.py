"""The fleet metrics of one snapshot (what ``gangway exporter`` serves), over a small cluster
built in code: every metric with its real numbers, a pending gang in each reason class, and a
node whose free GPUs no pending pod fits for want of CPU (fragmented)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gangway.scheduling.admission import Verdict, WaitsFor, admit
from gangway.scheduling.capacity import view_of
from gangway.scheduling.fleet_metrics import FLEET_METRICS, PENDING_REASONS
from gangway.scheduling.fleet_samples import (
    EXPORTER_METRICS,
    FLEET_FAMILIES,
    exporter_families,
    fleet_families,
    pending_reason,
)
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Snapshot
from tests.helpers.builders import gang

Values = dict[tuple[str, ...], float]


def _fleet() -> Snapshot:
    """c1: 4 H100 nodes (2 racks of 2) and one A100 node, 8 GPUs each.

    Running: ``big`` (research, 2 × 8 H100 on 000–001, low), ``small`` (evals, 1 × 4 H100 on
    002, started 5 minutes ago), ``a100`` (vision, 1 × 6 A100 with 90 of the node's 96 cores).
    Pending: research ``p`` (1 × 8: fits on 003 now), ``d2`` (2 × 8, high: evicting ``big``
    makes room), ``d`` (2 × 8, may not evict: waits for two free nodes); evals ``q`` (1 × 8
    over its capability of 8, 4 held); vision ``n`` (16 GPUs a pod: no node has them) and
    ``f`` (2 A100 and 8 cores: the A100 node has the GPUs but 6 cores)."""
    b = (
        SnapshotBuilder()
        .priority("high", 1000)
        .priority("low", 10)
        .priority("critical", 100000, preempting=False)
        .team("research", classes=["low", "high", "critical"])
        .team("evals", classes=["critical"])
        .team("vision", classes=["low", "critical"])
    )
    c = b.cluster("c1").racks(2, per_rack=2, prefix="c1-h100")
    c.node("c1-a100-000", gpu_type="A100", domains={"rack": "a-r0", "block": "a-b0"})
    c.queue(
        "research",
        guarantee={"gpu": 8},
        deserved={"gpu": 16, "gpu/H100": 16},
        capability={"gpu": 40},
    )
    c.queue("evals", capability={"gpu": 8})
    c.queue("vision")
    c.running(
        "big",
        queue="research",
        pods=2,
        priority_class="low",
        nodes=["c1-h100-000", "c1-h100-001"],
        checkpoint_hours_ago=0.5,
    )
    c.running("small", queue="evals", pods=1, gpus=4, nodes=["c1-h100-002"], hours=1 / 12)
    c.running("a100", queue="vision", pods=1, gpus=6, cpu=90, gpu_type="A100", hours=3)
    c.pending("p", queue="research", pods=1, priority_class="high")
    c.pending("d2", queue="research", pods=2, priority_class="high", hours=0.5)
    c.pending("d", queue="research", pods=2, priority_class="critical", hours=2)
    c.pending("q", queue="evals", pods=1, priority_class="critical", hours=0.25)
    c.pending("n", queue="vision", pods=1, gpus=16, priority_class="critical")
    c.pending("f", queue="vision", pods=1, gpus=2, gpu_type="A100", priority_class="critical")
    return b.build()


@pytest.fixture(scope="module")
def values() -> dict[str, Values]:
    snap = _fleet()
    families = fleet_families(snap, previous=snap.taken_at - timedelta(minutes=10))
    return {f.spec.name: dict(f.samples) for f in families}


def test_every_declared_fleet_metric_is_computed(values: dict[str, Values]) -> None:
    declared = {m.name for m in FLEET_METRICS if m.emitted_by == "exporter"}
    assert set(FLEET_FAMILIES) | set(EXPORTER_METRICS) == declared
    assert list(values) == list(FLEET_FAMILIES)


def test_queue_quotas_and_what_they_hold(values: dict[str, Values]) -> None:
    """``any`` is the quota key ``gpu``; deserved is raised to the guarantee; guarantee and
    capability only where set."""
    assert values["gangway_queue_allocated_gpus"] == {
        ("c1", "research", "any"): 16,
        ("c1", "research", "H100"): 16,
        ("c1", "evals", "any"): 4,
        ("c1", "evals", "H100"): 4,
        ("c1", "vision", "any"): 6,
        ("c1", "vision", "A100"): 6,
    }
    assert values["gangway_queue_guarantee_gpus"] == {("c1", "research", "any"): 8}
    assert values["gangway_queue_deserved_gpus"] == {
        ("c1", "research", "any"): 16,
        ("c1", "research", "H100"): 16,
    }
    assert values["gangway_queue_capability_gpus"] == {
        ("c1", "research", "any"): 40,
        ("c1", "evals", "any"): 8,
    }


def test_pending_gangs_by_reason_and_the_oldest(values: dict[str, Values]) -> None:
    pending = {k: v for k, v in values["gangway_queue_pending_gangs"].items() if v}
    assert pending == {
        ("c1", "research", "fits_now"): 1,
        ("c1", "research", "preemption"): 1,
        ("c1", "research", "domain"): 1,
        ("c1", "evals", "quota"): 1,
        ("c1", "vision", "never_fits"): 1,
        ("c1", "vision", "domain"): 1,
    }
    assert len(values["gangway_queue_pending_gangs"]) == 3 * len(PENDING_REASONS)  # zeros too
    # vision's pending gangs have no creation time: no age rather than a wrong one
    assert values["gangway_queue_oldest_pending_seconds"] == {
        ("c1", "research"): 7200.0,
        ("c1", "evals"): 900.0,
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        pytest.param("p", "fits_now", id="admit-fits-now"),
        pytest.param("d2", "preemption", id="preempt-lower-priority-of-its-queue"),
        pytest.param("d", "domain", id="wait-for-two-free-nodes"),
        pytest.param("q", "quota", id="wait-for-capability"),
        pytest.param("n", "never_fits", id="reject-no-node-that-big"),
        pytest.param("f", "domain", id="wait-gpus-free-but-cpu-short"),
    ],
)
def test_each_pending_gang_is_classed_by_its_decision(name: str, reason: str) -> None:
    snap = _fleet()
    fleet = view_of(snap)
    g = next(g for g in snap.clusters["c1"].gangs if g.name == name)
    assert pending_reason(g, fleet, "c1") == reason


def test_a_wait_says_what_it_waits_for_as_a_field() -> None:
    """The class comes from the decision's ``waits_for``, never from its text."""
    snap = _fleet()
    quota = admit(gang(1, team="evals", priority_class="critical"), snap).clusters[0]
    room = admit(gang(2, team="research", priority_class="critical"), snap).clusters[0]
    assert (quota.verdict, quota.waits_for) == (Verdict.WAIT, WaitsFor.QUOTA)
    assert (room.verdict, room.waits_for) == (Verdict.WAIT, WaitsFor.ROOM)
    fits = admit(gang(1, team="research", priority_class="high"), snap).clusters[0]
    assert (fits.verdict, fits.waits_for) == (Verdict.ADMIT, None)


def test_a_live_pending_gang_of_no_known_model_takes_the_best_model() -> None:
    """A live pending gang's pods are on no node, so its model is unknown: any model may do."""
    snap = _fleet()
    g = next(g for g in snap.clusters["c1"].gangs if g.name == "p")
    assert pending_reason(g.model_copy(update={"gpu_type": None}), view_of(snap), "c1") == (
        "fits_now"
    )


def test_cluster_capacity_and_fragmentation(values: dict[str, Values]) -> None:
    """H100: 002's 4 free GPUs fit no pending pod (all want 8 or 16); 003's 8 do. A100: 2
    free, but 6 cores where ``f`` wants 8 — a near miss, so fragmented."""
    assert values["gangway_cluster_allocatable_gpus"] == {("c1", "H100"): 32, ("c1", "A100"): 8}
    assert values["gangway_cluster_allocated_gpus"] == {("c1", "H100"): 20, ("c1", "A100"): 6}
    assert values["gangway_cluster_free_gpus"] == {("c1", "H100"): 12, ("c1", "A100"): 2}
    assert values["gangway_cluster_fragmented_gpus"] == {("c1", "H100"): 4, ("c1", "A100"): 2}


def test_nothing_is_fragmented_with_nothing_pending_for_the_model() -> None:
    snap = _fleet()
    state = snap.clusters["c1"]
    h100_only = [g for g in state.gangs if g.phase == "Running" or g.gpu_type == "H100"]
    one = snap.model_copy(
        update={"clusters": {"c1": state.model_copy(update={"gangs": h100_only})}}
    )
    (frag,) = (f for f in fleet_families(one) if f.spec.name == "gangway_cluster_fragmented_gpus")
    assert dict(frag.samples) == {("c1", "H100"): 4, ("c1", "A100"): 0}
    quiet = [g for g in state.gangs if g.phase == "Running"]
    none = snap.model_copy(update={"clusters": {"c1": state.model_copy(update={"gangs": quiet})}})
    (frag,) = (f for f in fleet_families(none) if f.spec.name == "gangway_cluster_fragmented_gpus")
    assert set(dict(frag.samples).values()) == {0}


def test_team_gpu_seconds_since_the_previous_snapshot(values: dict[str, Values]) -> None:
    """10 minutes: research 16 GPUs × 600 s; evals' gang started 5 minutes ago (4 × 300 s)."""
    assert values["gangway_team_gpu_seconds_total"] == {
        ("c1", "evals"): 1200.0,
        ("c1", "research"): 9600.0,
        ("c1", "vision"): 3600.0,
    }
    first = fleet_families(_fleet())  # no previous snapshot: nothing counted yet
    (team,) = (f for f in first if f.spec.name == "gangway_team_gpu_seconds_total")
    assert {v for _, v in team.samples} == {0.0}


def test_checkpoint_ages_of_running_gangs(values: dict[str, Values]) -> None:
    assert values["gangway_gang_last_checkpoint_age_seconds"] == {
        ("c1", "default", "research", "big"): 1800.0
    }


def test_only_the_clusters_asked_for() -> None:
    families = fleet_families(_fleet(), clusters=["elsewhere"])
    assert all(not f.samples for f in families)


def test_the_exporter_health() -> None:
    before = {
        f.spec.name: f.samples
        for f in exporter_families(["c1"], errors=0, last_ok=None, duration=None)
    }
    assert before == {
        "gangway_exporter_last_snapshot_time_seconds": (),
        "gangway_exporter_snapshot_errors_total": ((("c1",), 0.0),),
        "gangway_exporter_snapshot_duration_seconds": (),
    }
    after = exporter_families(["c1", "c2"], errors=2, last_ok=1.5e9, duration=0.25)
    assert [dict(f.samples) for f in after] == [
        {("c1",): 1.5e9, ("c2",): 1.5e9},
        {("c1",): 2.0, ("c2",): 2.0},
        {("c1",): 0.25, ("c2",): 0.25},
    ]
