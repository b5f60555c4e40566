"""Admission and preemption decisions, scenario by scenario, over snapshots built in code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from gangway.scheduling.admission import Verdict, admit
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Amount, Snapshot
from gangway.scheduling.workload import Workload
from tests.helpers.builders import cluster, gang


@dataclass
class Case:
    id: str
    snapshot: Callable[[], Snapshot]
    workload: Workload
    verdict: Verdict
    says: list[str] = field(default_factory=list)
    """Substrings of the reason (or of the problems, for a rejection)."""


def _busy_racks() -> Snapshot:
    """Rack r0: 3 of 4 nodes busy; rack r1: 1 of 4 — free in one rack at most 3."""
    b, c = cluster(racks=2, per_rack=4)
    c.running("a", queue="evals", pods=3, nodes=["c1-h100-000", "c1-h100-001", "c1-h100-002"])
    c.running("b", queue="evals", pods=1, nodes=["c1-h100-004"])
    return b.build()


def _fragmented() -> Snapshot:
    """Every node has 3 of 8 GPUs busy: 5 free each, never 8 — "largest now" in GPUs."""
    b, c = cluster(racks=1, per_rack=2)
    for i in range(2):
        c.running(f"s{i}", queue="evals", pods=1, gpus=3, nodes=[f"c1-h100-00{i}"])
    return b.build()


def _low_gang_in_queue() -> Snapshot:
    b, c = cluster(racks=1, per_rack=4)
    c.running("old-low", queue="research", pods=2, priority_class="low", hours=4)
    c.running("new-low", queue="research", pods=2, priority_class="low", hours=1)
    return b.build()


def _high_gang_in_queue() -> Snapshot:
    b, c = cluster(racks=1, per_rack=2)
    c.running("peer", queue="research", pods=2, priority_class="high")
    return b.build()


def _evals_over_deserved(guarantee: int) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        b = (
            SnapshotBuilder()
            .priority("low", 10)
            .team("research", classes=["low"])
            .team("evals", classes=["low"])
        )
        c = b.cluster("c1").racks(1, per_rack=4)
        c.queue("research", deserved={"gpu": 16})
        c.queue("evals", deserved={"gpu": 8}, guarantee={"gpu": guarantee})
        c.running("e1", queue="evals", pods=2, priority_class="low")
        c.running("e2", queue="evals", pods=2, priority_class="low")
        return b.build()

    return build


def _simple() -> Snapshot:
    return cluster()[0].build()


CASES = [
    Case("admit-when-a-rack-is-free", _simple, gang(4, within="rack"), Verdict.ADMIT, ["rack"]),
    Case(
        "reject-gang-larger-than-any-rack",
        _simple,
        gang(5, within="rack"),
        Verdict.REJECT,
        ["needs 5 pods of 8 × H100 in one rack; at most 4 ever fit"],
    ),
    Case(
        "reject-pod-larger-than-any-node",
        _simple,
        gang(1, gpus=16),
        Verdict.REJECT,
        ["at most 0 ever fit"],
    ),
    Case(
        "reject-unknown-team-names-the-field",
        _simple,
        gang(1, team="reserch", fields={"team": "metadata.labels.gangway.dev/team"}),
        Verdict.REJECT,
        ["metadata.labels.gangway.dev/team: no team 'reserch'"],
    ),
    Case(
        "reject-priority-class-the-team-may-not-use",
        _simple,
        gang(1, priority_class="critical"),
        Verdict.REJECT,
        ["priority_class: team research may use low, high"],
    ),
    Case(
        "reject-unknown-priority-class",
        _simple,
        gang(1, priority_class="urgent"),
        Verdict.REJECT,
        ["no priority class 'urgent'"],
    ),
    Case(
        "reject-gpu-model-no-cluster-has",
        _simple,
        gang(1, gpu_type="B200"),
        Verdict.REJECT,
        ["gpu_type: no B200 GPUs in any cluster (H100)"],
    ),
    Case(
        "reject-gpu-model-outside-the-team-quota",
        lambda: cluster()[0].team("research", classes=["low"], gpu_types=["A100"]).build(),
        gang(1),
        Verdict.REJECT,
        ["gpu_type: team research's quota names A100"],
    ),
    Case(
        "reject-a-model-for-pods-that-want-no-gpus",
        _simple,
        gang(1, gpus=0, gpu_type="H100"),
        Verdict.REJECT,
        ["gpu_type: names GPU model H100 but the pods request no GPUs"],
    ),
    Case(
        "reject-gpus-without-a-model-when-several-are-allowed",
        lambda: _two_models(),
        gang(1, gpu_type=None),
        Verdict.REJECT,
        ["gpu_type: the pods request GPUs: name the model (A100, H100)"],
    ),
    Case(
        "the-team's-only-model-is-the-default",
        _simple,
        gang(1, gpu_type=None),
        Verdict.ADMIT,
        [],
    ),
    Case(
        "a-misspelt-model-gets-a-hint",
        _simple,
        gang(1, gpu_type="h100"),
        Verdict.REJECT,
        ["no h100 GPUs in any cluster (H100) (did you mean 'H100'?)"],
    ),
    Case(
        "reject-unknown-topology-tier",
        _simple,
        gang(1, within="row"),
        Verdict.REJECT,
        ["within: no topology tier 'row' (block, rack)"],
    ),
    Case(
        "reject-an-empty-gang",
        _simple,
        gang(0),
        Verdict.REJECT,
        ["pods: 0 pods: a gang has 1 to 1,000,000"],
    ),
    Case(
        "reject-over-queue-capability",
        lambda: cluster(capability={"gpu/H100": 16})[0].build(),
        gang(3),
        Verdict.REJECT,
        ["needs 24 H100 GPUs, more than queue research's capability (16 H100 GPUs)"],
    ),
    Case(
        "wait-names-what-is-missing",
        _busy_racks,
        gang(4, within="rack"),
        Verdict.WAIT,
        ["waits for 4 pods of 8 × H100 free in one rack; largest now: 3"],
    ),
    Case(
        "wait-when-gpus-are-fragmented",
        _fragmented,
        gang(1),
        Verdict.WAIT,
        ["waits for 1 pod of 8 × H100 free in the cluster; largest now: 0"],
    ),
    Case(
        "wait-for-queue-capability",
        lambda: _cap_full(),
        gang(1),
        Verdict.WAIT,
        [
            "queue research holds 16 H100 GPUs of its capability of 16 H100 GPUs and the gang "
            "needs 8 H100 GPUs: waits for 8 H100 GPUs to be released"
        ],
    ),
    Case(
        "preempt-lowest-priority-whole-gang",
        _low_gang_in_queue,
        gang(2, priority_class="high"),
        Verdict.PREEMPT,
        ["evicting new-low makes room"],
    ),
    Case(
        "never-preempt-an-equal-priority-gang",
        _high_gang_in_queue,
        gang(1, priority_class="high"),
        Verdict.WAIT,
        ["waits for 1 pod of 8 × H100 free in the cluster; largest now: 0"],
    ),
    Case(
        "reclaim-from-a-queue-over-its-deserved-share",
        _evals_over_deserved(guarantee=0),
        gang(2, priority_class="low"),
        Verdict.PREEMPT,
        ["evicting e"],
    ),
    Case(
        "never-reclaim-below-guarantee",
        _evals_over_deserved(guarantee=32),
        gang(2, priority_class="low"),
        Verdict.WAIT,
        [],
    ),
]


def _two_models() -> Snapshot:
    b, c = cluster()
    c.racks(1, per_rack=2, gpu_type="A100")
    return b.team("research", classes=["low"], gpu_types=["A100", "H100"]).build()


def _cap_full() -> Snapshot:
    b, c = cluster(capability={"gpu/H100": 16})
    c.running("mine", queue="research", pods=2, priority_class="high")
    return b.build()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_admission(case: Case) -> None:
    d = admit(case.workload, case.snapshot())
    assert d.verdict == case.verdict, d
    text = d.reason
    for s in case.says:
        assert s in text, f"{s!r} not in {text!r}"
    if case.verdict == Verdict.REJECT and d.problems:
        assert all(p.path for p in d.problems)


def test_preemption_takes_whole_gangs_and_says_what_they_lose() -> None:
    b, c = cluster(racks=1, per_rack=4)
    c.running("big-low", queue="research", pods=2, priority_class="low", checkpoint_hours_ago=2)
    c.running("small-low", queue="research", pods=1, priority_class="low", checkpoint_hours_ago=1)
    d = admit(gang(2, priority_class="high"), b.build())
    assert d.verdict == Verdict.PREEMPT
    plan = d.clusters[0].preemption
    assert plan is not None
    # One node is free; one more is needed: the cheaper whole gang goes (8 GPU-h, not 32).
    assert [v.gang.name for v in plan.victims] == ["small-low"]
    assert plan.victims[0].lost_gpu_hours == 8.0 and plan.cost == 8.0
    assert plan.victims[0].rule == "preempt: same queue, priority 10 < 1000"
    assert sum(plan.assignment.nodes.values()) == 2
    # Needing 3 nodes, evicting the small gang is not enough: the big one goes whole, and
    # the small one is pruned from the plan.
    d = admit(gang(3, priority_class="high"), b.build())
    plan = d.clusters[0].preemption
    assert plan is not None and [v.gang.name for v in plan.victims] == ["big-low"]


def test_a_non_preempting_class_waits_instead_of_evicting() -> None:
    b, c = cluster(racks=1, per_rack=2)
    c.queue("evals")
    c.running("low", queue="evals", pods=2, priority_class="low")
    d = admit(gang(1, team="evals", priority_class="critical"), b.build())
    assert d.verdict == Verdict.WAIT and d.clusters[0].preemption is None


def test_hard_topology_waits_where_volcano_would_not_preempt() -> None:
    """Volcano's preempt action skips a Job with a networkTopology: the plan is shown, marked
    as one Volcano will not make, and the verdict stays wait."""
    b, c = cluster(racks=1, per_rack=2)
    c.running("low", queue="research", pods=2, priority_class="low")
    d = admit(gang(2, priority_class="high", within="rack"), b.build())
    assert d.verdict == Verdict.WAIT
    plan = d.clusters[0].preemption
    assert plan is not None and not plan.volcano_acts and "skips a Job" in (plan.note or "")
    assert "preempt skips a Job that carries a networkTopology" in d.reason


def test_unknown_checkpoint_time_makes_the_cost_unknown() -> None:
    b, c = cluster(racks=1, per_rack=2)
    c.running("low", queue="research", pods=2, priority_class="low")
    snap = b.build()
    nocheck = snap.clusters["c1"].gangs[0].model_copy(update={"started_at": None})
    snap = snap.model_copy(
        update={"clusters": {"c1": snap.clusters["c1"].model_copy(update={"gangs": [nocheck]})}}
    )
    plan = admit(gang(2, priority_class="high"), snap).clusters[0].preemption
    assert plan is not None and plan.cost is None


def test_the_best_cluster_verdict_wins() -> None:
    b, c = cluster(racks=1, per_rack=1)
    c.running("x", queue="evals", pods=1)
    c2 = b.cluster("c2", region="eu-west-1").racks(1, per_rack=1)
    c2.queue("research")
    c2.queue("evals")
    d = admit(gang(1), b.build())
    assert d.verdict == Verdict.ADMIT
    assert {r.cluster: r.verdict for r in d.clusters} == {"c1": Verdict.WAIT, "c2": Verdict.ADMIT}
    assert admit(gang(1), b.build(), cluster="c1").verdict == Verdict.WAIT
    assert admit(gang(1), b.build(), cluster="nope").problems[0].path == "cluster"


def test_a_victim_whose_loss_is_unknown_goes_after_every_known_one() -> None:
    b, c = cluster(racks=1, per_rack=2)
    c.running("known-big", queue="research", pods=1, priority_class="low", checkpoint_hours_ago=9)
    c.running("unknown", queue="research", pods=1, priority_class="low")
    snap = b.build()
    g = snap.clusters["c1"].gangs[1].model_copy(update={"started_at": None})
    state = snap.clusters["c1"].model_copy(update={"gangs": [snap.clusters["c1"].gangs[0], g]})
    snap = snap.model_copy(update={"clusters": {"c1": state}})
    plan = admit(gang(1, priority_class="high"), snap).clusters[0].preemption
    assert plan is not None and [v.gang.name for v in plan.victims] == ["known-big"]


def test_deserved_is_judged_per_gpu_model_too() -> None:
    from gangway.scheduling.placement import place

    b, _ = cluster(racks=1, per_rack=4, deserved={"gpu": 64, "gpu/H100": 8})
    o = place(gang(2), b.build()).options[0]
    assert o.factors["deserved"] == 0.0
    assert any("beyond queue research's deserved gpu/H100 (8 H100 GPUs)" in n for n in o.notes)


def test_reclaim_stops_at_the_victim_queue_deserved_share() -> None:
    """Volcano re-checks after every victim: evals (deserved 8) holding 24 gives up at most
    two of its three gangs, which is not enough for 4 nodes: wait, not a drained queue."""
    b = SnapshotBuilder().priority("low", 10).team("research", classes=["low"])
    b.team("evals", classes=["low"])
    c = b.cluster("c1").racks(1, per_rack=4)
    c.queue("research", deserved={"gpu": 64})
    c.queue("evals", deserved={"gpu": 8})
    for i in range(3):
        c.running(f"e{i}", queue="evals", pods=1, priority_class="low")
    d = admit(gang(4, priority_class="low"), b.build())
    assert d.verdict == Verdict.WAIT, d.reason
    d = admit(gang(3, priority_class="low"), b.build())
    plan = d.clusters[0].preemption
    assert d.verdict == Verdict.PREEMPT and plan is not None and len(plan.victims) == 2


def test_a_plan_never_places_on_a_cordoned_node() -> None:
    """Evicting the low gang on the cordoned node frees nothing the new gang may use."""
    b, c = cluster(racks=1, per_rack=3)
    c.running("low", queue="research", pods=1, priority_class="low", nodes=["c1-h100-000"])
    c.running("peer", queue="research", pods=1, priority_class="high", nodes=["c1-h100-002"])
    snap = b.build()
    state = snap.clusters["c1"]
    nodes = [state.nodes[0].model_copy(update={"schedulable": False}), *state.nodes[1:]]
    snap = snap.model_copy(update={"clusters": {"c1": state.model_copy(update={"nodes": nodes})}})
    d = admit(gang(2, priority_class="high"), snap)
    assert d.verdict == Verdict.WAIT and d.clusters[0].preemption is None


def test_hold_and_release_give_back_exactly_what_was_taken() -> None:
    from gangway.scheduling.capacity import view_of
    from gangway.scheduling.snapshot.cluster_state import Gang

    snap = cluster(racks=1, per_rack=2)[0].build()
    view = view_of(snap).clusters["c1"]
    free, usage = view.free.copy(), {q: dict(u) for q, u in view.usage.items()}
    g = Gang(name="g", queue="research", pods=2, per_pod=Amount(cpu=8, memory="64Gi", gpus=8),
             gpu_type="H100", priority=10)  # fmt: skip
    running = view.hold(g, {0: 1, 1: 1})
    assert view.used("research", "gpu/H100") == 16 and int(view.free[:, 2].sum()) == 0
    view.release(running)
    assert (view.free == free).all() and view.used("research", "gpu/H100") == 0
    assert all(
        view.used(q, k) == usage.get(q, {}).get(k, 0) for q in view.usage for k in view.usage[q]
    )
    with pytest.raises(ValueError, match="not running"):
        view.release(running)


def test_gangs_of_the_same_name_in_two_namespaces_are_two_gangs() -> None:
    b, c = cluster(racks=1, per_rack=2)
    c.running("train", queue="research", pods=1, priority_class="low")
    c.running("train2", queue="research", pods=1, priority_class="low")
    snap = b.build()
    state = snap.clusters["c1"]
    gangs = [
        state.gangs[0].model_copy(update={"namespace": "team-a"}),
        state.gangs[1].model_copy(update={"name": "train", "namespace": "team-b"}),
    ]
    snap = snap.model_copy(update={"clusters": {"c1": state.model_copy(update={"gangs": gangs})}})
    d = admit(gang(2, priority_class="high"), snap)
    plan = d.clusters[0].preemption
    assert d.verdict == Verdict.PREEMPT and plan is not None
    assert sorted(v.gang.key for v in plan.victims) == ["team-a/train", "team-b/train"]


@pytest.mark.parametrize(
    ("cpu_only", "with_gpu"),
    [("a-cpu", "b-gpu"), ("b-cpu", "a-gpu")],
    ids=["cpu-first", "gpu-first"],
)
def test_a_verdict_does_not_depend_on_the_victims_names(cpu_only: str, with_gpu: str) -> None:
    """evals (deserved 16 GPUs, 16 cores) holds 16 GPUs and 24 cores: over its share by the
    CPU-only gang's 8 cores. Evicting that one first would bring it within its share and forbid
    the GPU gang — the only victim that frees what the gang lacks — and the verdict would be
    wait. Named either way, the one victim is a gang that holds GPUs (between the two that do,
    equal in priority and cost, node order decides, not names)."""
    b = SnapshotBuilder().priority("low", 10).team("research", classes=["low"])
    b.team("evals", classes=["low"])
    c = b.cluster("c1").racks(1, per_rack=2)
    c.queue("research", deserved={"gpu": 16, "cpu": 64})
    c.queue("evals", deserved={"gpu": 16, "cpu": 16})
    c.running("e-held", queue="evals", pods=1, priority_class="low", nodes=["c1-h100-000"])
    c.running(cpu_only, queue="evals", pods=1, gpus=0, cpu=8, priority_class="low")
    c.running(with_gpu, queue="evals", pods=1, priority_class="low", nodes=["c1-h100-001"])
    d = admit(gang(1, priority_class="low"), b.build())
    plan = d.clusters[0].preemption
    assert d.verdict == Verdict.PREEMPT, d.reason
    assert plan is not None and [v.gang.name for v in plan.victims] == ["e-held"]
