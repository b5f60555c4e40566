"""Which gangs are evicted, node by node (:mod:`gangway.scheduling.victims`): scenarios that
pin the search's choices, and a comparison with every subset of victims on small fleets."""

from __future__ import annotations

import itertools
import random

import pytest

from gangway.scheduling.admission import Verdict, admit
from gangway.scheduling.snapshot.build import ClusterBuilder, SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Snapshot
from tests.helpers.builders import gang

CLASSES = {"low": 10, "mid": 100, "high": 1000, "top": 5000}


def _fleet(racks: int = 1, per_rack: int = 4) -> tuple[SnapshotBuilder, ClusterBuilder]:
    """One cluster of ``racks`` × ``per_rack`` nodes of 8 H100; team research (class high) in
    queue research, which may reclaim up to 64 GPUs."""
    b = SnapshotBuilder()
    for name, value in CLASSES.items():
        b.priority(name, value)
    b.team("research", classes=["high"], gpu_types=["H100"])
    c = b.cluster("c1").racks(racks, per_rack=per_rack, racks_per_block=racks)
    c.queue("research", deserved={"gpu": 64})
    return b, c


def _victims(snap: Snapshot, pods: int, gpus: int = 8, **kw: object) -> list[str]:
    d = admit(gang(pods, gpus, priority_class="high", **kw), snap)
    plan = d.clusters[0].preemption
    assert plan is not None, d.reason
    return sorted(v.gang.name for v in plan.victims)


def test_the_victims_are_on_the_node_that_gives_a_pod_room() -> None:
    """A pod of 8 GPUs needs one whole node: evicting the cheap 2-GPU gangs beside the pinned
    ones frees 2 GPUs on each node and never a whole one, so the one gang on n0 goes."""
    b, c = _fleet()
    c.running("whole", queue="research", pods=1, priority_class="low", nodes=["c1-h100-000"])
    for i in (1, 2, 3):
        node = [f"c1-h100-00{i}"]
        c.running(f"cheap{i}", queue="research", pods=1, gpus=2, hours=0.5, nodes=node)
        c.running(f"pinned{i}", queue="research", pods=1, gpus=6, priority_class="top", nodes=node)
    assert _victims(b.build(), 1) == ["whole"]


def test_lower_priorities_go_first_even_when_more_gangs_go() -> None:
    b, c = _fleet(per_rack=2)
    for name in ("low1", "low2"):
        c.running(name, queue="research", pods=1, gpus=4, priority_class="low")
    c.running("mid", queue="research", pods=1, priority_class="mid", nodes=["c1-h100-001"])
    assert _victims(b.build(), 1) == ["low1", "low2"]


def test_a_gang_on_two_nodes_frees_both_and_the_one_it_made_needless_is_kept() -> None:
    """``single`` (the cheapest) goes first; ``pair`` then frees two nodes at once, so the gang
    fits without ``single``, which is pruned from the plan."""
    b, c = _fleet(per_rack=3)
    nodes = ["c1-h100-000", "c1-h100-001", "c1-h100-002"]
    c.running("single", queue="research", pods=1, priority_class="low", hours=0.1, nodes=nodes[:1])
    c.running("pair", queue="research", pods=2, priority_class="low", hours=0.2, nodes=nodes[1:])
    assert _victims(b.build(), 2) == ["pair"]


def test_no_plan_when_no_one_rack_could_ever_be_freed() -> None:
    """Each rack has one gang that may go and one that may not: two whole nodes are never free
    in one rack, although two could be across the racks."""
    b, c = _fleet(racks=2, per_rack=2)
    c.queue("other", deserved={"gpu": 1})
    for r in (0, 1):
        c.running(f"gone{r}", queue="other", pods=1, nodes=[f"c1-h100-00{2 * r}"])
        c.running(f"kept{r}", queue="research", pods=1, priority_class="top")
    d = admit(gang(2, priority_class="high", within="rack"), b.build())
    assert d.verdict == Verdict.WAIT and d.clusters[0].preemption is None, d.reason
    d = admit(gang(2, priority_class="high"), b.build())  # anywhere: both go
    assert d.verdict == Verdict.PREEMPT and d.clusters[0].preemption is not None
    assert sorted(v.gang.name for v in d.clusters[0].preemption.victims) == ["gone0", "gone1"]


def test_a_rack_that_must_evict_a_higher_priority_loses_to_one_that_need_not() -> None:
    """Rack r0 looks cheapest (a1, a2 started minutes ago), but queue other1 may lose only one
    of them before it is down to its deserved share, so r0 would need ``m`` (mid); rack r1
    gives the room with two low gangs, and is chosen."""
    b, c = _fleet(racks=2, per_rack=3)
    c.queue("other1", deserved={"gpu": 8}).queue("other2", deserved={"gpu": 1})
    c.queue("other3", deserved={"gpu": 1})
    place = {"a1": 0, "a2": 1, "m": 2, "b1": 3, "b2": 4, "b3": 5}
    for name, i in place.items():
        queue = {"a": "other1", "m": "other2", "b": "other3"}[name[0]]
        cls = "mid" if name == "m" else "low"
        hours = 0.1 if name[0] == "a" else 2.0
        c.running(
            name, queue=queue, pods=1, priority_class=cls, hours=hours, nodes=[f"c1-h100-00{i}"]
        )
    assert _victims(b.build(), 2, within="rack") == ["b1", "b2"]


SHARES = {"other1": 8, "other2": 12}
"""Deserved GPUs of the queues reclaim takes from."""

Gangs = dict[str, tuple[str, int, int, dict[str, int]]]
"""Name → (queue, priority, GPUs a pod, placement)."""


def _random_fleet(seed: int, queues: list[str], gangs: tuple[int, int]) -> tuple[Snapshot, Gangs]:
    """2 racks × 3 nodes with ``gangs`` (a range) random gangs of ``queues``; queues other
    than research get their :data:`SHARES`."""
    rng = random.Random(seed)
    b, c = _fleet(racks=2, per_rack=3)
    for q, share in SHARES.items():
        if q in queues:
            c.queue(q, deserved={"gpu": share})
    free = {f"c1-h100-00{i}": 8 for i in range(6)}
    out: Gangs = {}
    for k in range(rng.randint(*gangs)):
        pods, gpus = rng.choice([1, 1, 2]), rng.choice([1, 2, 4, 8])
        room = [n for n, f in free.items() if f >= gpus]
        if len(room) < pods:
            continue
        nodes = rng.sample(room, pods)
        cls = rng.choice(["low", "mid", "top"])
        queue = rng.choice(queues) if len(queues) > 1 else queues[0]
        c.running(
            f"g{k}",
            queue=queue,
            pods=pods,
            gpus=gpus,
            priority_class=cls,
            hours=rng.uniform(0.1, 5),
            nodes=nodes,
        )
        for n in nodes:
            free[n] -= gpus
        out[f"g{k}"] = (queue, CLASSES[cls], gpus, {n: 1 for n in nodes})
    return b.build(), out


def _valid(chosen: tuple[str, ...], gangs: Gangs) -> bool:
    """Some order of ``chosen`` passes Volcano's reclaim rules: each victim's queue is still
    over its deserved GPUs before it goes (best: the largest last), and preempt within research
    takes only priorities below high."""
    for q, share in SHARES.items():
        sizes = [gangs[n][2] * len(gangs[n][3]) for n in chosen if gangs[n][0] == q]
        used = sum(g * len(w) for queue, _, g, w in gangs.values() if queue == q)
        if sizes and used - sum(sizes) + max(sizes) <= share:
            return False
    return all(gangs[n][1] < CLASSES["high"] for n in chosen if gangs[n][0] == "research")


def _best(gangs: Gangs, pods: int, gpus: int, within: bool) -> int | None:
    """Over every set of gangs the rules allow (:func:`_valid`): the lowest top priority of a
    set whose eviction lets ``pods`` pods of ``gpus`` GPUs fit — in one rack when ``within``
    — (0: they fit as it is), or None."""
    best = None
    for k in range(len(gangs) + 1):
        for chosen in itertools.combinations(gangs, k):
            if not _valid(chosen, gangs):
                continue
            free = {f"c1-h100-00{i}": 8 for i in range(6)}
            for name, (_, _, g, where) in gangs.items():
                if name not in chosen:
                    for n in where:
                        free[n] -= g
            racks = [sum(free[f"c1-h100-00{i}"] // gpus for i in r) for r in ((0, 1, 2), (3, 4, 5))]
            if (max(racks) if within else sum(racks)) >= pods:
                top = max((gangs[n][1] for n in chosen), default=0)
                best = top if best is None else min(best, top)
    return best


@pytest.mark.parametrize("within", [False, True], ids=["anywhere", "one-rack"])
def test_a_plan_is_found_whenever_some_set_of_victims_makes_room(within: bool) -> None:
    """On 120 random small fleets (preempt within one queue, so every set of lower-priority
    gangs may go): the search finds a plan exactly when some set would make room, and evicts
    no higher priority than the best such set must."""
    tried = 0
    for seed in range(120):
        snap, gangs = _random_fleet(seed, ["research"], (3, 10))
        rng = random.Random(1000 + seed)
        pods, gpus = rng.randint(1, 3), rng.choice([2, 4, 8])
        w = gang(pods, gpus, priority_class="high", within="rack" if within else None)
        d = admit(w, snap)
        best = _best(gangs, pods, gpus, within)
        if d.verdict == Verdict.ADMIT:
            assert best == 0, seed
            continue
        # one rack: Volcano's preempt skips a Job with a networkTopology, so the plan is the
        # one it would have made (shown on the wait)
        plan = d.clusters[0].preemption
        assert (plan is not None) == (best is not None), (seed, d.reason)
        if plan is not None:
            tried += 1
            top = max(v.gang.priority for v in plan.victims)
            assert top == best, (seed, [v.gang.name for v in plan.victims])
    assert tried > 30


@pytest.mark.parametrize("within", [False, True], ids=["anywhere", "one-rack"])
def test_with_reclaim_a_plan_is_found_whenever_a_set_the_rules_allow_makes_room(
    within: bool,
) -> None:
    """As above with reclaim from two queues over their deserved shares (each may lose gangs
    only while still over it), and — anywhere — preempt within research: a plan exactly when
    some set the rules allow makes room, evicting no higher priority than it must. In one
    rack there are no research gangs (Volcano's preempt skips such a Job; reclaim does not)."""
    tried = 0
    for seed in range(120):
        queues = ["other1", "other2"] + ([] if within else ["research"])
        snap, gangs = _random_fleet(seed, queues, (4, 11))
        rng = random.Random(2000 + seed)
        pods, gpus = rng.randint(1, 3), rng.choice([2, 4, 8])
        d = admit(gang(pods, gpus, priority_class="high", within="rack" if within else None), snap)
        if d.verdict == Verdict.ADMIT:
            continue
        best = _best(gangs, pods, gpus, within)
        plan = d.clusters[0].preemption if d.verdict == Verdict.PREEMPT else None
        assert (plan is not None) == (best is not None), (seed, d.reason)
        if plan is not None:
            tried += 1
            assert max(v.gang.priority for v in plan.victims) == best, seed
    assert tried > 30
