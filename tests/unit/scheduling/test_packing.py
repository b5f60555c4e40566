"""Packing: the node- and GPU-choosing rule that capacity.assign and the trace simulator share —
scenario-named cases over small clusters, and properties of every choice."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangway.scheduling.packing import MAX_SHAPES, MILLI, Nodes, Packer, Profile, Shape


def cluster(*nodes: tuple[int, int, list[int], str]) -> Nodes:
    """Nodes of (CPU millicores, memory MiB, idle milli per GPU, model)."""
    width = max(len(n[2]) for n in nodes) or 1
    idle = np.full((len(nodes), width), -1, dtype=np.int64)
    models: dict[str | None, int] = {}
    for i, (_, _, gpus, _) in enumerate(nodes):
        idle[i, : len(gpus)] = gpus
    return Nodes(
        cpu=np.array([n[0] for n in nodes], dtype=np.int64),
        memory=np.array([n[1] for n in nodes], dtype=np.int64),
        gpu_idle=idle,
        model=np.array([models.setdefault(n[3], len(models)) for n in nodes], dtype=np.int32),
        models=models,
    )


def one_gpu(cpu: int = 8000, memory: int = 32768, milli: int = MILLI, model: str = "") -> Shape:
    return Shape(cpu, memory, 1, milli, frozenset({model}) if model else frozenset())


EIGHT = Shape(64000, 262144, 8, MILLI)
FULL = [MILLI] * 8


def choose(nodes: Nodes, profile: Profile, pod: Shape) -> tuple[int, tuple[int, ...]]:
    c = Packer(profile, nodes).choose(pod, np.arange(len(nodes.cpu)))
    return c.node, c.gpus


def test_a_profile_keeps_the_most_frequent_shapes_so_placement_stays_fast() -> None:
    rare = [one_gpu(cpu=1000 + i) for i in range(MAX_SHAPES + 40)]
    profile = Profile.of([one_gpu()] * 5 + rare)
    assert len(profile.shapes) == MAX_SHAPES and profile.shapes[0] == one_gpu()
    assert abs(sum(profile.weights) - 1) < 1e-9


def test_shared_pod_takes_the_gpu_it_fills_best() -> None:
    nodes = cluster((96000, 393216, [1000, 190, 1000, 600], "G2"))
    profile = Profile.of([one_gpu(milli=810)] * 3 + [one_gpu(milli=160), one_gpu()])
    assert choose(nodes, profile, one_gpu(milli=160)) == (0, (1,))  # the 190 left beside an 810


def test_whole_gpu_pod_keeps_an_empty_node_whole_for_an_eight_gpu_pod() -> None:
    three = [0, 0, 0, 0, 0, 1000, 1000, 1000]
    nodes = cluster((96000, 393216, FULL, "G2"), (96000, 393216, three, "G2"))
    profile = Profile.of([one_gpu()] * 10 + [EIGHT] * 2)
    assert choose(nodes, profile, one_gpu())[0] == 1


def test_cpu_pod_goes_where_cpu_is_spare_beside_the_gpus() -> None:
    tight = (24000, 131072, [1000, 1000], "G2")  # just enough CPU for its two GPUs' pods
    rich = (104000, 524288, [1000, 1000], "T4")
    profile = Profile.of([one_gpu(cpu=12000)] * 4)
    assert choose(cluster(tight, rich), profile, Shape(16000, 32768))[0] == 1


def test_memory_left_beside_idle_gpus_counts_too() -> None:
    low = (96000, 70000, [1000, 1000], "A")  # 2 GPUs, memory for one 40 GiB pod after this one
    high = (96000, 400000, [1000, 1000], "A")
    profile = Profile.of([one_gpu(memory=40960)] * 4)
    assert choose(cluster(low, high), profile, Shape(1000, 30000))[0] == 1


def test_capacity_only_some_pods_accept_is_kept_for_them() -> None:
    nodes = cluster((64000, 262144, FULL, "V100"), (64000, 262144, FULL, "T4"))
    profile = Profile.of([one_gpu(model="V100")] * 5 + [one_gpu()] * 5)
    assert choose(nodes, profile, one_gpu())[0] == 1  # the V100 stays for the V100-only pods


def test_the_last_gpus_of_a_model_pinned_pods_need_are_kept_for_them() -> None:
    # One pod in ten must have a T4, and the T4 node has two GPUs of the ten. Valued by
    # frequency alone, the T4 node loses hardly more room than the G2 node, and the tighter
    # fit takes it; T4 room is five times scarcer than room on any model: the G2 node.
    g2 = (96000, 393216, FULL, "G2")
    t4 = (104000, 524288, [1000, 1000], "T4")
    profile = Profile.of([one_gpu()] * 9 + [one_gpu(model="T4")])
    assert choose(cluster(g2, t4), profile, one_gpu())[0] == 0
    unaware = Packer(profile, cluster(g2, t4), scarcity=False)
    assert unaware.choose(one_gpu(), np.arange(2)).node == 1


def test_scarcity_is_the_room_left_on_any_model_over_that_on_the_models_taken() -> None:
    g2 = (96000, 393216, FULL, "G2")
    t4 = (104000, 524288, [1000, 1000], "T4")
    profile = Profile.of([one_gpu()] * 3 + [one_gpu(model="T4")])
    weights = Packer(profile, cluster(g2, t4)).weights()
    assert weights.tolist() == [0.75, 0.25 * 10 / 2]  # 10 GPUs fit it on any model, 2 on T4
    assert Packer(profile, cluster(g2, t4), scarcity=False).weights().tolist() == [0.75, 0.25]
    assert Packer(Profile.of([one_gpu()]), cluster(g2, t4)).weights().tolist() == [1.0]


def test_scarcity_follows_the_cluster_as_it_fills() -> None:
    nodes = cluster((96000, 393216, FULL, "G2"), (104000, 524288, [1000, 1000], "T4"))
    profile = Profile.of([one_gpu()] * 3 + [one_gpu(model="T4"), EIGHT])
    packer = Packer(profile, nodes)
    for node, gpu in [(1, 0), (0, 0), (0, 3), (1, 1)]:
        nodes.gpu_idle[node, gpu] = 0
        nodes.cpu[node] -= 8000
        assert packer.weights().tolist() == Packer(profile, nodes).weights().tolist()
    assert packer.weights()[1] == pytest.approx(0.2 * 6)  # no T4 left: one GPU's worth


def test_ties_go_to_the_tightest_then_the_lowest_node() -> None:
    same = (96000, 393216, FULL, "G2")
    assert choose(cluster(same, same, same), Profile.of([]), one_gpu()) == (0, (0,))
    half = (96000, 393216, [0, 0, 0, 0, 1000, 1000, 1000, 1000], "G2")
    assert choose(cluster(same, half), Profile.of([]), one_gpu()) == (1, (4,))


def test_room_for_whole_gpus_is_every_free_gpu_while_one_pod_still_fits() -> None:
    four = [1000] * 4
    nodes = cluster(
        (24000, 393216, four, "G2"), (8000, 393216, four, "G2"), (96000, 393216, [470, 0], "G2")
    )
    room = Packer(Profile.of([one_gpu(cpu=12000)]), nodes).room()
    assert list(room) == [4000.0, 0.0, 0.0]  # CPU for two pods; for none: all four stranded


def test_room_for_a_shared_shape_is_the_copies_cpu_memory_and_gpus_allow() -> None:
    four = [1000] * 4
    nodes = cluster(
        (24000, 393216, four, "G2"), (8000, 393216, four, "G2"), (96000, 393216, [470, 0], "G2")
    )
    shared = Packer(Profile.of([one_gpu(milli=230)]), nodes).room()
    assert list(shared) == [3 * 230, 1 * 230, 2 * 230]  # 16 fit the GPUs, CPU allows 3; 1; 2


def test_a_node_whose_state_changed_is_valued_again() -> None:
    nodes = cluster((96000, 393216, FULL, "G2"))
    packer = Packer(Profile.of([one_gpu()]), nodes)
    assert packer.room()[0] == 8000
    nodes.gpu_idle[0, :3] = 0
    nodes.cpu[0] -= 3 * 8000
    assert packer.room()[0] == 5000


def test_the_profile_weighs_shapes_by_how_often_they_come() -> None:
    p = Profile.of([one_gpu()] * 3 + [EIGHT] + [Shape(4000, 8192)])  # CPU-only: no GPU room
    assert p.shapes == (one_gpu(), EIGHT) and p.weights == (0.75, 0.25)


def test_amounts_float32_cannot_hold_exactly_are_refused() -> None:
    with pytest.raises(ValueError, match="below 2"):
        Packer(Profile.of([one_gpu()]), cluster((2**25, 1024, [1000], "A")))


@st.composite
def states(draw: st.DrawFn) -> tuple[Nodes, Profile, Shape]:
    n = draw(st.integers(1, 6))
    nodes = []
    for _ in range(n):
        gpus = draw(st.lists(st.sampled_from([0, 50, 190, 470, 530, 1000]), min_size=1, max_size=8))
        nodes.append((draw(st.integers(0, 96000)), draw(st.integers(0, 400000)), gpus, "G2"))
    milli = st.sampled_from([160, 320, 470, 810, 1000])
    shape = st.builds(
        Shape,
        st.integers(0, 32000),
        st.integers(0, 131072),
        st.sampled_from([0, 1, 1, 2, 8]),
        milli,
    ).map(lambda s: Shape(s.cpu, s.memory, s.gpus, s.gpu_milli if s.gpus else 0))
    return cluster(*nodes), Profile.of(draw(st.lists(shape, max_size=6))), draw(shape)


@settings(max_examples=200, deadline=None)
@given(states())
def test_every_choice_is_a_feasible_node_and_gpus_that_hold_the_pod(
    state: tuple[Nodes, Profile, Shape],
) -> None:
    nodes, profile, pod = state
    idle = nodes.gpu_idle
    if pod.shared:
        gpu_ok = (idle >= pod.gpu_milli).any(axis=1)
    else:
        gpu_ok = (idle == MILLI).sum(axis=1) >= pod.gpus
    ok = np.flatnonzero((nodes.cpu >= pod.cpu) & (nodes.memory >= pod.memory) & gpu_ok)
    if not len(ok):
        return
    packer = Packer(profile, nodes)
    choice = packer.choose(pod, ok)
    assert choice.node in ok
    assert len(choice.gpus) == pod.gpus and len(set(choice.gpus)) == pod.gpus
    for g in choice.gpus:
        assert idle[choice.node, g] >= (pod.gpu_milli if pod.shared else MILLI)
    _, _, loss, _ = packer.losses(pod, ok)
    assert np.all(loss >= -1e-3)  # taking capacity never adds room


def test_a_choice_among_many_scores_each_state_once_and_chooses_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above DISTINCT_AT candidates, one node of each state is scored — the lowest-index one,
    which the tie-break would take — and every choice is what scoring all of them gives."""
    import gangway.scheduling.packing as packing

    rng = np.random.default_rng(5)
    states = [(96000, 786432, list(rng.choice([0, 190, 500, MILLI], 8)), m) for m in "ab" * 4]
    nodes = cluster(*(states[int(i)] for i in rng.integers(0, len(states), 600)))
    profile = Profile.of([one_gpu(milli=190), one_gpu(), EIGHT, Shape(4000, 16384)])
    pods = [one_gpu(milli=190), one_gpu(), one_gpu(model="a"), Shape(4000, 16384), EIGHT]
    picks: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for at in (10**9, 50):
        monkeypatch.setattr(packing, "DISTINCT_AT", at)
        work = Nodes(
            nodes.cpu.copy(), nodes.memory.copy(), nodes.gpu_idle.copy(), nodes.model, nodes.models
        )
        packer = Packer(profile, work)
        for k in range(40):
            pod = pods[k % len(pods)]
            ok = np.flatnonzero(
                (work.cpu >= pod.cpu)
                & ((work.gpu_idle >= max(pod.gpu_milli, 1)).sum(1) >= pod.gpus)
            )
            if not len(ok):
                continue
            c = Packer.choose(packer, pod, ok)
            picks.setdefault(at, []).append((c.node, c.gpus))
            work.cpu[c.node] -= pod.cpu
            for g in c.gpus:
                work.gpu_idle[c.node, g] -= pod.gpu_milli
    assert len(picks[50]) > 30 and picks[50] == picks[10**9]
