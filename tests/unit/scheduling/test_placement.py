"""Placement: which cluster, which topology domain, which nodes — scenarios and properties."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gangway.scheduling.admission import Verdict
from gangway.scheduling.capacity import assign, fit, view_of
from gangway.scheduling.placement import place
from gangway.scheduling.snapshot.build import SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.scheduling.workload import Workload
from tests.helpers.builders import gang


def two_regions() -> SnapshotBuilder:
    b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    for name, region in (("us", "us-east-1"), ("eu", "eu-west-1")):
        c = b.cluster(name, region=region).racks(2, per_rack=4)
        c.gpu_products = {"H100": f"NVIDIA-H100-{name}"}
        c.queue("research")
    return b


def test_prefer_cluster_with_data() -> None:
    snap = two_regions().build()
    p = place(gang(2, data_region="eu-west-1"), snap)
    assert p.chosen is not None and p.chosen.cluster == "eu"
    assert [o.cluster for o in p.options] == ["eu", "us"]
    us = p.options[1]
    assert us.factors["locality"] == 0.0 and any("cross-region egress" in n for n in us.notes)
    assert place(gang(2, data_region="us-east-1"), snap).options[0].cluster == "us"


def test_prefer_cluster_with_headroom_when_data_is_anywhere() -> None:
    b = two_regions()
    b.clusters["us"].running("busy", queue="research", pods=6)
    p = place(gang(1), b.build())
    assert [o.cluster for o in p.options] == ["eu", "us"]
    assert p.options[0].factors["headroom"] > p.options[1].factors["headroom"]


def test_a_cluster_where_it_fits_now_beats_a_local_one_where_it_waits() -> None:
    b = two_regions()
    b.clusters["eu"].running("busy", queue="research", pods=8, priority_class="normal")
    p = place(gang(2, data_region="eu-west-1"), b.build())
    assert [(o.cluster, o.decision.verdict) for o in p.options] == [
        ("us", Verdict.ADMIT),
        ("eu", Verdict.WAIT),
    ]


def test_best_fit_rack_keeps_the_emptier_rack_whole() -> None:
    b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    c = b.cluster("c").racks(2, per_rack=4)
    c.queue("research")
    c.running("x", queue="research", pods=2, nodes=["c-h100-004", "c-h100-005"])
    p = place(gang(2, within="rack"), b.build())
    a = p.options[0].decision.assignment  # the fuller second rack, not the first that fits
    assert a is not None and a.domain == "c-h100-r1" and a.slots_left == 0
    assert p.topology is not None and p.topology.tier == 1 and p.topology.hard


def test_a_small_gang_packs_beside_running_ones_and_keeps_nodes_whole_for_big_gangs() -> None:
    b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    c = b.cluster("c").racks(1, per_rack=4)
    c.queue("research")
    c.running("small", queue="research", pods=1, gpus=4, nodes=["c-h100-002"])
    c.running("big", queue="research", pods=1, gpus=8, nodes=["c-h100-003"])
    p = place(gang(1, gpus=2), b.build())
    a = p.options[0].decision.assignment  # most room first would break an empty node
    assert a is not None and [p.options[0].decision.cluster, *a.nodes] == ["c", 2]
    alone = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    alone.cluster("c").racks(1, per_rack=4).queue("research")
    first = place(gang(1, gpus=2), alone.build()).options[0].decision.assignment
    assert first is not None and list(first.nodes) == [0]  # no gangs: the most room, in order


def test_closest_tier_first_then_wider() -> None:
    b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    b.cluster("c").racks(4, per_rack=2, racks_per_block=2).queue("research")
    snap = b.build()
    one_rack = place(gang(2), snap).options[0].decision.assignment
    assert one_rack is not None and one_rack.tier == "rack"
    one_block = place(gang(4), snap).options[0].decision.assignment
    assert one_block is not None and one_block.tier == "block"
    anywhere = place(gang(8), snap).options[0].decision.assignment
    assert anywhere is not None and anywhere.tier is None and len(anywhere.nodes) == 8
    t = place(gang(4), snap).topology
    assert t is not None and (t.tier, t.tier_name, t.hard) == (2, "block", False)


def test_the_chosen_placement_goes_onto_the_job(crd_schemas: object) -> None:
    """``place_gangs`` writes the topology and the model's node selector onto the pipeline's
    Volcano Job, which still validates against Volcano's CRD once Argo fills it."""
    from pathlib import Path

    from gangway.lint import lint_manifest
    from gangway.scheduling.workload import gang_workloads, place_gangs
    from gangway.workflows.compiler import compile_pipeline

    obj = compile_pipeline(Path("pipelines/train_eval_infer_gpu.py"))
    (w,) = gang_workloads(obj, {"nodes": "2", "gpus-per-node": "8"})
    w = replace(w, gpu_type="H100", within="rack", priority_class="normal")
    p = place(w, two_regions().build())
    assert p.topology is not None and p.chosen is not None
    placed = place_gangs(obj, {w.name: p.topology})
    template = next(t for t in placed["spec"]["templates"] if t.get("resource"))
    text = template["resource"]["manifest"]
    assert "networkTopology:\n    mode: hard\n    highestTierAllowed: 1" in text
    assert f"nvidia.com/gpu.product: NVIDIA-H100-{p.chosen.cluster}" in text
    assert "minAvailable: {{inputs.parameters.nodes}}" in text  # counts stay integers
    from gangway.argo.substitution import fill_known

    text = text.replace("{{=asInt(inputs.parameters.nodes) - 1}}", "1")
    scope = {
        "inputs.parameters.nodes": "2",
        "inputs.parameters.gpus-per-node": "8",
        "inputs.parameters.procs-per-node": "8",
    }
    job = yaml.safe_load(fill_known(text, scope, "a"))
    errors = [f for f in lint_manifest(job, crd_schemas) if f.severity == "error"]  # type: ignore[arg-type]
    assert not errors, errors


# Properties -------------------------------------------------------------------------------


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[Snapshot, Workload]:
    racks = draw(st.integers(1, 4))
    per_rack = draw(st.integers(1, 4))
    b = SnapshotBuilder().priority("normal", 100).team("research", classes=["normal"])
    c = b.cluster("c").racks(racks, per_rack=per_rack)
    c.queue("research")
    n = racks * per_rack
    for i in range(draw(st.integers(0, n))):
        node = f"c-h100-{draw(st.integers(0, n - 1)):03d}"
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        c.running(f"g{i}", queue="research", pods=1, gpus=gpus, nodes=[node])
    used = {x.name: x.used for x in c.nodes}
    if any(u[2] > 8 for u in used.values()):  # over-full nodes are not a real snapshot
        c.gangs.clear()
        for x in c.nodes:
            x.used = [0, 0, 0]
    w = gang(
        draw(st.integers(1, 6)),
        gpus=draw(st.sampled_from([1, 2, 4, 8])),
        within=draw(st.sampled_from([None, "rack", "block"])),
    )
    return b.build(), w


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_placement_never_overcommits_a_node_nor_splits_a_gang(
    case: tuple[Snapshot, Workload],
) -> None:
    snap, w = case
    view = view_of(snap).clusters["c"]
    counts = fit(view, w.per_pod, w.gpu_type)
    a = assign(view, counts, w.pods, within=w.within)
    if a is None:
        total = int(counts.sum())
        assert w.within is not None or total < w.pods
        for t in range(view.state.tiers.index(w.within) + 1 if w.within else 0):
            room = np.bincount(view.domains[t], weights=counts)
            assert room.max(initial=0) < w.pods  # no allowed domain could have held it
        return
    assert sum(a.nodes.values()) == w.pods  # the whole gang, no more
    shape = np.array((w.per_pod.cpu, w.per_pod.memory, w.per_pod.gpus))
    for i, k in a.nodes.items():
        assert np.all(k * shape <= view.free[i]), (view.nodes[i], k)
    if a.tier is not None:  # one domain holds every pod
        t = view.state.tiers.index(a.tier)
        assert {view.domain_names[t][view.domains[t][i]] for i in a.nodes} == {a.domain}
    if w.within is not None:
        assert a.tier is not None
        assert view.state.tiers.index(a.tier) <= view.state.tiers.index(w.within)


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_decisions_are_deterministic_for_a_snapshot(case: tuple[Snapshot, Workload]) -> None:
    snap, w = case
    again = Snapshot.model_validate(snap.model_dump(mode="json"))  # equal, not the same object
    first, second = place(w, snap), place(w, again)
    assert first.decision.verdict == second.decision.verdict
    assert [(o.cluster, o.score, o.decision.reason) for o in first.options] == [
        (o.cluster, o.score, o.decision.reason) for o in second.options
    ]
    a, b = first.options[0].decision.assignment, second.options[0].decision.assignment
    assert (a and a.nodes) == (b and b.nodes)


@pytest.fixture
def crd_schemas() -> object:
    from gangway.lint import CrdSchemas

    schemas = CrdSchemas.from_env()
    if schemas is None:
        pytest.skip("set GANGWAY_CRDS_DIR to the upstream CRDs (Volcano Job schema)")
    return schemas


def test_a_soft_topology_on_a_job_is_a_preference_not_a_constraint() -> None:
    from gangway.scheduling.workload import workload_of_job

    job: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "spec": {"minAvailable": 2, "queue": "research", "tasks": []},
    }
    for mode, within in (("soft", None), ("hard", "rack"), (None, "rack")):
        topo = {"highestTierAllowed": 1, **({"mode": mode} if mode else {})}
        w = workload_of_job(
            {**job, "spec": {**job["spec"], "networkTopology": topo}},
            name="j",
            team=None,
            tiers=["rack", "block"],
        )
        assert w.within == within, mode


@st.composite
def contended(draw: st.DrawFn) -> tuple[Snapshot, Workload]:
    """Two queues on 1–3 racks, nodes partly held by low and high gangs of both."""
    b = SnapshotBuilder().priority("low", 10).priority("high", 1000)
    b.team("research", classes=["low", "high"]).team("evals", classes=["low", "high"])
    racks, per_rack = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    c = b.cluster("c").racks(racks, per_rack=per_rack)
    c.queue("research", deserved={"gpu": draw(st.integers(0, 64))})
    c.queue("evals", deserved={"gpu": draw(st.integers(0, 64))},
            guarantee={"gpu": draw(st.integers(0, 16))})  # fmt: skip
    for i, node in enumerate(n.name for n in c.nodes):
        if draw(st.booleans()):
            c.running(
                f"g{i}",
                queue=draw(st.sampled_from(["research", "evals"])),
                pods=1,
                gpus=draw(st.sampled_from([4, 8])),
                priority_class=draw(st.sampled_from(["low", "high"])),
                nodes=[node],
            )
    w = gang(draw(st.integers(1, 4)), gpus=draw(st.sampled_from([4, 8])), priority_class="high")
    return b.build(), w


@settings(max_examples=150, deadline=None)
@given(contended())
def test_a_preemption_plan_fits_and_follows_the_rules(case: tuple[Snapshot, Workload]) -> None:
    from gangway.scheduling.admission import admit

    snap, w = case
    d = admit(w, snap)
    plan = d.clusters[0].preemption if d.clusters else None
    if plan is None:
        return
    view = view_of(snap).clusters["c"]
    free = view.free.copy()
    for v in plan.victims:
        rows, amounts = view.rows(v.gang)
        free[rows] = np.minimum(free[rows] + amounts, view.allocatable[rows])
        assert v.gang.phase == "Running"
        if v.gang.queue == "research":  # preempt: only lower priority, within the queue
            assert v.gang.priority < 1000 and v.rule.startswith("preempt")
        else:
            assert v.rule.startswith("reclaim")
    shape = np.array((w.per_pod.cpu, w.per_pod.memory, w.per_pod.gpus))
    placed = plan.assignment.nodes
    assert sum(placed.values()) == w.pods
    for i, k in placed.items():
        assert np.all(k * shape <= free[i]), view.nodes[i]
    assert len({v.gang.key for v in plan.victims}) == len(plan.victims)
