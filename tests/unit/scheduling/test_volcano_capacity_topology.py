"""Volcano's capacity-plugin and network-topology test tables, replayed through :func:`admit`.

Each case rebuilds one table entry of Volcano's scheduler unit tests as a Gangway snapshot and
one pending gang (two, decided in turn, for one case), and checks that Gangway predicts what
the upstream test asserts: the pending job bound (on which nodes, in which one hypernode),
pipelined after evicting which running pods, or left as it is. Where Gangway disagrees, the
case keeps the upstream expectation and is a strict ``xfail`` that says what Gangway does
instead.

Sources (read from the stored copies of ``volcano-sh/volcano``; the store holds several
untagged versions of each file, and the copies used are at least as new as v1.15.1):

* ``pkg/scheduler/plugins/capacity/capacity_test.go`` —
  ``Test_capacityPlugin_OnSessionOpenWithoutHierarchy`` (case0–case10; cases 7–10 cite
  volcano#4918 and #5048, so this copy is likely newer than v1.15.1), ``TestEnqueueAndAllocatable``
  (case0, 1, 2, 4) and ``Test_capacityPlugin_OnSessionOpenWithHierarchy`` (case0–case12; another
  stored copy adds case13–case16, about enqueueing against guarantees, considered below).
  ``Test_updateQueueAttrShare`` tests a helper's arithmetic, not a scheduling decision: out of
  scope.
* ``pkg/scheduler/actions/allocate/allocate_test.go`` — its network-topology tests:
  ``TestAllocateWithNetWorkTopologies`` (25 cases in the newest copy, which adds the
  ``highestTierName`` cases and expects "LCAHyperNode is empty" to allocate where an older copy
  did not), ``TestNodeLevelScoreWithNetWorkTopologies`` (1),
  ``TestHyperNodeBinpackWithNetWorkTopologies`` (1) and
  ``TestAllocateWithPartitionPolicyNetworkTopology`` (37). The rest of the file
  (``TestAllocate``, fair share, PVC, DRA, worksheets) is not about topology: out of scope.

How a Volcano test becomes a Gangway scenario:

* Upstream nodes, pods and queue quotas keep their CPU and memory exactly (``1.5`` cores,
  ``3G``, ``4Gi``). An extended GPU resource (``nvidia.com/gpu``, ``nvidia.com/A100``) is GPUs of
  one model, and a queue's amount of it is its ``gpu`` quota key (what Volcano counts).
* Every running PodGroup here has ``minMember`` 1, so each running pod is a gang of its own,
  named after the pod (``p6`` can be evicted without ``p5``). A pending job is one gang of its
  pods; a job with ``minAvailable`` below its replicas is a gang of all its replicas (upstream
  binds every one of them).
* **Stand-in for ``volcano.sh/preemptable: "false"``**: Gangway has no per-gang "never evict"
  flag, so such a pod runs in class ``pinned`` (above every other). Across queues (reclaim) a
  higher priority only puts it last among the victims; in every case using it the victim taken
  first already settles the outcome.
* **Stand-in for a job's ``nodeSelector``** (capacity case0, the two "with affinity" topology
  cases): the one node the selector rules out runs nothing, so it is cordoned — the pending pod
  then has exactly the nodes the selector leaves it.
* Hypernode tiers are topology tiers, closest first: ``rack`` (tier 1, or tier 0 where the test
  numbers from 0), ``block``, ``spine``; hypernode names are domain names (``s0``, ``s2``). A hard
  ``highestTierAllowed`` is the workload's ``within``; a ``highestTierName`` names the tier
  itself. Without a ``nodes`` expectation a case checks what upstream checks
  (``MinimalBindCheck``): the whole job is bound, and (hard) within one domain of the allowed
  tier.
* ``rdma/hca`` (hierarchy case12) is dropped: Gangway has no RDMA resource, and the node has
  999 of it free, far more than the pending pod's 1. The ``pods`` entries of queue quotas
  (hierarchy case2–case4) are dropped too: Gangway has no pod-count quota, and no case comes
  near one.

Not translated (what Gangway cannot express):

capacity_test.go
  - ``case4: Pods are assigned according to the order of Queue Priority in which PGs are
    placed`` (without hierarchy): two pending jobs in queues of different ``priority``
    competing for one free node; Gangway decides one gang at a time and has no queue priority.
  - ``TestEnqueueAndAllocatable`` ``case4: queue with non-open state, can not enqueue``: a
    closed queue (``state: Closed``).
  - hierarchy ``case6: podgroup can't be enqueued when any ancestor queue's capability is not
    enough``: two pending PodGroups without pods, one admitted to the queue (``Inqueue``) and so
    reserving its parent's capability against the other; Gangway has no enqueue reservation and
    decides one gang at a time.
  - hierarchy ``case7: ... guarantee exceeds the capacity of queue7, but should not panic`` and
    ``case10: root queue's capability > cluster total resource, but should not panic``: no
    pending job; they assert only that the session opens.
  - hierarchy ``case9: When some scalar resources are 0 in deserved, the check can still
    pass``: a zero-valued extra scalar resource (``hugepages-1Gi: 0``) on the queues and the
    node; Gangway counts only CPU, memory and GPUs.
  - hierarchy ``case13: allow enqueue below guarantee``, ``case14: not allow to enqueue above
    guarantee when cluster is full``, ``case15: allow enqueue below deserved when no guarantee
    on the cluster``, ``case16: not allow to enqueue above deserved when cluster is full and no
    guarantee on the cluster`` (one stored copy): they assert the PodGroup phase the enqueue
    action leaves (``Inqueue`` or ``Pending``) on a full cluster, where nothing can be bound
    either way; Gangway's verdicts (wait in all four) do not tell a job Volcano admits to its
    queue from one it holds back. The copy also needs ``rdma/hca``.

allocate_test.go, ``TestAllocateWithNetWorkTopologies``
  - every "tasks in job rescheduled" case — ``soft ...: can allocate job when resources are
    enough``, ``... and minavailable = replicas``, ``... when cross highestTierAllowed tier and
    hyperNodesInfo has three tier``; ``hard ...: can allocate job when highestTierAllowed not
    reached``, ``... and minavailable = replicas``, ``... and hyperNodesInfo has three tier``,
    ``can not allocate job when cross highestTierAllowed tier``, ``... and hyperNodesInfo has
    three tier``, ``can allocate job when LCAHyperNode is empty``; ``highestTierName``: ``can
    allocate job when the tier corresponding to highestTierName not reached``, ``... and
    minavailable = replicas``, ``... and hyperNodesInfo has three tier``, ``can not allocate job
    when cross the tier corresponding to highestTierName``, ``... can allocate job when here is
    no corresponding highestTierAllowed for highestTierName`` (14 cases): a Job partly running
    (some pods bound in a hypernode, one pending) whose pending pod must join the running ones'
    hypernode; Gangway has no partly running gang, nor a constraint relative to where a gang's
    other pods already are.
  - ``TestNodeLevelScoreWithNetWorkTopologies`` (``hard network topology constrain, allocate job
    to highest score hypeNode with node level binpack``): a gang whose pods differ in shape
    (a 2-CPU master, a 4-CPU worker; Gangway sizes every pod as the largest) and the binpack
    plugin's node scores.
  - ``TestAllocateWithPartitionPolicyNetworkTopology``, all 37 cases (``podgroup hard ... and
    subGroup soft ...`` ×6, ``podgroup soft ... and subGroup hard ...`` ×5, ``podgroup hard ...
    and subGroup hard ...`` ×19 including the ``minSubGroups`` ones, ``rescheduling scenario:
    ...`` ×6, ``no network topology at job or subgroup level but has SubJobPolicy``): a Job's
    ``subGroupPolicy`` (sub-groups by pod label, each with its own ``networkTopology``,
    ``subGroupSize`` and ``minSubGroups``); Gangway models one gang of one shape with one
    constraint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from gangway.scheduling.admission import Decision, Verdict, admit
from gangway.scheduling.capacity import ClusterView, view_of
from gangway.scheduling.snapshot.checks import problems
from gangway.scheduling.snapshot.cluster_state import Amount, Gang, Snapshot
from gangway.scheduling.workload import Workload

NORMAL, PINNED = "normal", "pinned"
CLASSES = {NORMAL: 0, PINNED: 10**9}
"""Every upstream pod is of no priority class; ``pinned`` stands in for ``preemptable: false``."""
TAKEN_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CLUSTER = "c1"


@dataclass(frozen=True)
class N:
    """A node: CPU (cores), memory (a quantity), GPUs of ``gpu_type``, its hypernodes."""

    name: str
    cpu: str | int
    memory: str
    gpus: int = 0
    gpu_type: str | None = None
    domains: Mapping[str, str] = field(default_factory=dict)
    cordoned: bool = False


@dataclass(frozen=True)
class Run:
    """A running pod: a gang of one, on ``node``."""

    name: str
    queue: str
    node: str
    cpu: str | int
    memory: str
    gpus: int = 0
    gpu_type: str | None = None
    pinned: bool = False


@dataclass(frozen=True)
class Expect:
    """What upstream asserts for a pending job."""

    outcome: Literal["bind", "pipeline", "none"]
    """``bind``: allocated now; ``pipeline``: after evicting ``victims``; ``none``: neither."""
    nodes: Mapping[str, int] | None = None
    """Node → pods of the job there (None: only that all of them are placed)."""
    victims: tuple[str, ...] = ()
    within: str | None = None
    """Hard topology: the job's one domain is of this tier or a closer one."""
    per_domain: tuple[int, ...] | None = None
    """Pods in each closest-tier domain that has some, sorted."""


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    """The upstream test and case (the comment next to it gives the case's full name)."""
    nodes: tuple[N, ...]
    queues: Mapping[str, Mapping[str, Any]]
    pending: tuple[tuple[Workload, Expect], ...]
    running: tuple[Run, ...] = ()
    tiers: tuple[str, ...] = ()
    xfail: str | None = None


def job(
    name: str,
    queue: str,
    cpu: str | int,
    memory: str | int,
    *,
    pods: int = 1,
    gpus: int = 0,
    gpu_type: str | None = None,
    within: str | None = None,
    soft: bool = False,
) -> Workload:
    """A pending job of ``pods`` pods, each asking ``cpu`` cores, ``memory`` and ``gpus``."""
    return Workload(
        name=name,
        pods=pods,
        per_pod=Amount(cpu=cpu, memory=memory, gpus=gpus),
        team=queue,
        queue=queue,
        priority_class=NORMAL,
        gpu_type=gpu_type,
        within=within,
        soft_topology=soft,
    )


def _snapshot(case: Case) -> Snapshot:
    held: dict[str, Counter[str]] = {n.name: Counter() for n in case.nodes}
    gangs = []
    for r in case.running:
        per = Amount(cpu=r.cpu, memory=r.memory, gpus=r.gpus)
        held[r.node].update({"cpu": per.cpu, "memory": per.memory, "gpus": per.gpus})
        cls = PINNED if r.pinned else NORMAL
        gangs.append(
            {
                "name": r.name,
                "queue": r.queue,
                "pods": 1,
                "per_pod": per,
                "gpu_type": r.gpu_type if r.gpus else None,
                "priority_class": cls,
                "priority": CLASSES[cls],
                "phase": "Running",
                "placement": {r.node: 1},
                "started_at": TAKEN_AT - timedelta(hours=1),
            }
        )
    nodes = [
        {
            "name": n.name,
            "gpu_type": n.gpu_type if n.gpus else None,
            "allocatable": Amount(cpu=n.cpu, memory=n.memory, gpus=n.gpus),
            "allocated": Amount(
                cpu=f"{held[n.name]['cpu']}m",
                memory=held[n.name]["memory"],
                gpus=held[n.name]["gpus"],
            ),
            "domains": dict(n.domains),
            "schedulable": not n.cordoned,
        }
        for n in case.nodes
    ]
    return Snapshot.model_validate(
        {
            "taken_at": TAKEN_AT,
            "source": "generated",
            "priority_classes": {c: {"value": v} for c, v in CLASSES.items()},
            "default_priority_class": NORMAL,
            "teams": {q: {"queue": q, "priority_classes": list(CLASSES)} for q in case.queues},
            "clusters": {
                CLUSTER: {
                    "region": "r1",
                    "tiers": list(case.tiers),
                    "nodes": nodes,
                    "queues": {q: dict(args) for q, args in case.queues.items()},
                    "gangs": gangs,
                }
            },
        }
    )


def _placed(view: ClusterView, nodes: Mapping[int, int]) -> dict[str, int]:
    return {view.nodes[i]: k for i, k in nodes.items()}


def _check(d: Decision, w: Workload, want: Expect, view: ClusterView) -> None:
    row = d.clusters[0] if d.clusters else None
    if want.outcome == "none":
        assert d.verdict in (Verdict.WAIT, Verdict.REJECT), d.reason
        plan = row.preemption if row is not None else None
        assert plan is None or not plan.volcano_acts, plan
        return
    assert row is not None, d.reason
    if want.outcome == "bind":
        assert d.verdict == Verdict.ADMIT, d.reason
        a = row.assignment
    else:
        assert d.verdict == Verdict.PREEMPT, d.reason
        plan = row.preemption
        assert plan is not None and plan.volcano_acts
        assert sorted(v.gang.name for v in plan.victims) == sorted(want.victims)
        a = plan.assignment
    assert a is not None
    placed = _placed(view, a.nodes)
    assert sum(placed.values()) == w.pods, placed
    if want.nodes is not None:
        assert placed == dict(want.nodes)
    tiers = view.state.tiers
    if want.within is not None:
        assert a.tier is not None and tiers.index(a.tier) <= tiers.index(want.within), a
    if want.per_domain is not None:
        where = {n.name: n.domains.get(tiers[0]) for n in view.state.nodes}
        counts: Counter[str | None] = Counter()
        for node, k in placed.items():
            counts[where[node]] += k
        assert tuple(sorted(counts.values())) == want.per_domain, counts


def _hold(view: ClusterView, w: Workload, nodes: Mapping[int, int]) -> None:
    """The admitted job starts where it was placed, before the next is decided."""
    gang = Gang(
        name=w.name,
        queue=str(w.queue),
        pods=w.pods,
        per_pod=w.per_pod,
        gpu_type=w.gpu_type if w.per_pod.gpus else None,
        priority_class=NORMAL,
        priority=CLASSES[NORMAL],
    )
    view.hold(gang, dict(nodes))


# ---------------------------------------------------------------------------------------------
# capacity_test.go: Test_capacityPlugin_OnSessionOpenWithoutHierarchy

N1, N2 = N("n1", 2, "4Gi"), N("n2", 2, "4Gi")
A100 = "A100"
GPU = "GPU"

FLAT = [
    Case(
        "volcano-capacity-within-capability",
        # case0: Pod allocatable when queue has not exceed capability (p2's nodeSelector
        # matches n1 only: n2, which runs nothing, is cordoned)
        "OnSessionOpenWithoutHierarchy case0",
        nodes=(N1, N("n2", 2, "4Gi", cordoned=True)),
        queues={"q1": {"capability": {"cpu": 2, "memory": "2Gi"}}},
        running=(Run("p1", "q1", "n1", 1, "1Gi"),),
        pending=((job("p2", "q1", 1, "1Gi"), Expect("bind", {"n1": 1})),),
    ),
    Case(
        "volcano-capacity-over-capability",
        # case1: Pod not allocatable when queue exceed queue capability
        "OnSessionOpenWithoutHierarchy case1",
        nodes=(N1, N2),
        queues={"q2": {"capability": {"cpu": "1.5", "memory": "1.5Gi"}}},
        running=(Run("p3", "q2", "n1", 1, "1Gi"),),
        pending=((job("p4", "q2", 1, "1Gi"), Expect("none")),),
    ),
    Case(
        "volcano-capacity-reclaim-below-deserved",
        # case2: Can reclaim from other queues when allocated < deserved (p5 not preemptable)
        "OnSessionOpenWithoutHierarchy case2",
        nodes=(N1, N2),
        queues={
            "q3": {"deserved": {"cpu": 2, "memory": "4Gi"}},
            "q4": {"deserved": {"cpu": 2, "memory": "4Gi"}},
        },
        running=(
            Run("p5", "q3", "n1", 2, "4Gi", pinned=True),
            Run("p6", "q3", "n2", 2, "4Gi"),
        ),
        pending=((job("p7", "q4", 2, "4Gi"), Expect("pipeline", {"n2": 1}, ("p6",))),),
    ),
    Case(
        "volcano-capacity-reclaim-gpu-only-request",
        # case3: CPU & Memory are overused, scalar resource is not overused, but candidate pod
        # has not request CPU & Memory, reclaim should happen (p8 not preemptable)
        "OnSessionOpenWithoutHierarchy case3",
        nodes=(
            N("n3", 2, "4Gi", gpus=10, gpu_type=A100),
            N("n4", 2, "4Gi", gpus=10, gpu_type=A100),
        ),
        queues={
            "q5": {"deserved": {"cpu": 2, "memory": "4Gi", "gpu": 10}},
            "q6": {"deserved": {"cpu": 2, "memory": "4Gi", "gpu": 10}},
        },
        running=(
            Run("p8", "q5", "n3", 0, "0", gpus=10, gpu_type=A100, pinned=True),
            Run("p9", "q5", "n4", 0, "0", gpus=10, gpu_type=A100),
            Run("p10", "q6", "n3", 2, "4Gi"),
            Run("p11", "q6", "n4", 2, "4Gi"),
        ),
        pending=(
            (
                job("p12", "q6", 0, 0, gpus=10, gpu_type=A100),
                Expect("pipeline", {"n4": 1}, ("p9",)),
            ),
        ),
    ),
    Case(
        "volcano-capacity-reclaim-within-deserved-on-one-dimension",
        # case5: Can reclaim from other queues when allocated + req <= deserved on one dimension
        "OnSessionOpenWithoutHierarchy case5",
        nodes=(N1,),
        queues={
            "q10": {
                "deserved": {"cpu": 2, "memory": "2Gi"},
                "capability": {"cpu": 4, "memory": "4Gi"},
            },
            "q11": {
                "deserved": {"cpu": 0, "memory": 0},
                "capability": {"cpu": 2, "memory": "2Gi"},
            },
        },
        running=(Run("p16", "q10", "n1", 1, "3Gi"), Run("p18", "q11", "n1", 1, "1Gi")),
        pending=((job("p17", "q10", 1, "1Gi"), Expect("pipeline", {"n1": 1}, ("p18",))),),
    ),
    Case(
        "volcano-capacity-no-reclaim-over-deserved",
        # case6: Can not reclaim from other queues when allocated + req > deserved
        "OnSessionOpenWithoutHierarchy case6",
        nodes=(N1,),
        queues={
            "q12": {
                "deserved": {"cpu": 1, "memory": "2Gi"},
                "capability": {"cpu": 4, "memory": "4Gi"},
            },
            "q13": {
                "deserved": {"cpu": 0, "memory": 0},
                "capability": {"cpu": 2, "memory": "2Gi"},
            },
        },
        running=(Run("p19", "q12", "n1", 1, "1Gi"), Run("p21", "q13", "n1", 1, "1Gi")),
        pending=((job("p20", "q12", 1, "2Gi"), Expect("none")),),
    ),
    Case(
        "volcano-capacity-no-reclaim-of-unused-deserved-dimension",
        # case7: allocated does not contain scalar dimension (GPU), deserved does; should not
        # reclaim (volcano#4918 bug 2)
        "OnSessionOpenWithoutHierarchy case7",
        nodes=(N("n7", 4, "8Gi", gpus=4, gpu_type=GPU),),
        queues={
            "queue14": {"deserved": {"cpu": 2, "memory": "4Gi", "gpu": 2}},
            "queue15": {},
            "queue16": {"deserved": {"cpu": 2, "memory": "4Gi", "gpu": 2}},
        },
        running=(
            Run("p22", "queue14", "n7", 2, "4Gi"),
            Run("p23", "queue15", "n7", 0, "0", gpus=1, gpu_type=GPU),
            Run("p24", "queue16", "n7", 2, "1Gi", gpus=1, gpu_type=GPU),
        ),
        pending=((job("p25", "queue16", 2, "3Gi", gpus=1, gpu_type=GPU), Expect("none")),),
    ),
    Case(
        "volcano-capacity-reclaim-on-the-reclaimer-dimensions",
        # case8: reclaimer dimensions are considered properly while evicting reclaimees
        # (volcano#4918 bug 1, enhancement 1: p28 is an immediate victim)
        "OnSessionOpenWithoutHierarchy case8",
        nodes=(N("n8", 4, "8Gi", gpus=1, gpu_type=GPU),),
        queues={
            "queue17": {"deserved": {"cpu": 2, "memory": "2Gi"}},
            "queue18": {"deserved": {"cpu": 2, "memory": "4Gi", "gpu": 1}},
        },
        running=(
            Run("p26", "queue17", "n8", 0, "4Gi"),
            Run("p27", "queue17", "n8", 1, "0"),
            Run("p28", "queue17", "n8", 0, "0", gpus=1, gpu_type=GPU),
            Run("p29", "queue18", "n8", 2, "4Gi"),
        ),
        pending=(
            (
                job("p30", "queue18", 1, 0, gpus=1, gpu_type=GPU),
                Expect("pipeline", {"n8": 1}, ("p28",)),
            ),
        ),
    ),
    Case(
        "volcano-capacity-no-reclaim-within-scalar-only-deserved",
        # case9: reclaimee has intersecting scalar dimensions with deserved shouldn't be
        # reclaimed on cpu/memory (volcano#4918 bug 3)
        "OnSessionOpenWithoutHierarchy case9",
        nodes=(N("n8", 4, "8Gi", gpus=1, gpu_type=GPU),),
        queues={
            "queue19": {"deserved": {"gpu": 1}},
            "queue20": {"deserved": {"cpu": 2, "memory": "2Gi"}},
        },
        running=(Run("p31", "queue19", "n8", 4, "4Gi", gpus=1, gpu_type=GPU),),
        pending=((job("p32", "queue20", 1, "1Gi"), Expect("none")),),
    ),
    Case(
        "volcano-capacity-no-reclaim-beyond-capability",
        # case10: PreemptiveFn respects capability — no reclaim when futureUsed would exceed
        # capability (volcano#5048)
        "OnSessionOpenWithoutHierarchy case10",
        nodes=(N("n9", 8, "100Gi"), N("n10", 8, "100Gi")),
        queues={
            "queue21": {
                "deserved": {"cpu": 8, "memory": "100Gi"},
                "capability": {"cpu": 8, "memory": "100Gi"},
            },
            "queue22": {"capability": {"cpu": 2, "memory": "5Gi"}},
        },
        running=(Run("p33", "queue21", "n9", 7, "90Gi"), Run("p35", "queue22", "n10", 2, "5Gi")),
        pending=((job("p34", "queue21", 2, "5Gi"), Expect("none")),),
    ),
]

# ---------------------------------------------------------------------------------------------
# capacity_test.go: TestEnqueueAndAllocatable (capacity plugin only, enqueue + allocate)

ENQUEUE_NODES = (N("n1", 3, "3G"), N("n2", 3, "3G"))
ENQUEUE_QUEUES: dict[str, dict[str, Any]] = {
    "q1": {"deserved": {"cpu": 2, "memory": "2G"}, "capability": {"cpu": 2, "memory": "2G"}},
    "q2": {"deserved": {"cpu": 2, "memory": "2G"}, "capability": {"cpu": 3, "memory": "3G"}},
}
ENQUEUE_RUNNING = (Run("pod1", "q1", "n1", 1, "3G"), Run("pod2", "q2", "n2", 3, "1G"))

ENQUEUE = [
    Case(
        "volcano-capacity-enqueue-cpu-only-job-over-memory",
        # case0: memory exceed derserved, job only request cpu can be enqueued and allocated
        "TestEnqueueAndAllocatable case0",
        nodes=ENQUEUE_NODES,
        queues=ENQUEUE_QUEUES,
        running=ENQUEUE_RUNNING,
        pending=((job("pod3", "q1", 1, "0"), Expect("bind", {"n1": 1})),),
    ),
    Case(
        "volcano-capacity-enqueue-memory-only-job-over-cpu",
        # case1: cpu exceed derserved, job only request memory can be enqueued and allocated
        "TestEnqueueAndAllocatable case1",
        nodes=ENQUEUE_NODES,
        queues=ENQUEUE_QUEUES,
        running=ENQUEUE_RUNNING,
        pending=((job("pod4", "q2", 0, "1G"), Expect("bind", {"n2": 1})),),
    ),
    Case(
        "volcano-capacity-enqueue-over-capability",
        # case2: exceed capacity, can not enqueue
        "TestEnqueueAndAllocatable case2",
        nodes=ENQUEUE_NODES,
        queues=ENQUEUE_QUEUES,
        running=ENQUEUE_RUNNING,
        pending=((job("pod5", "q1", 1, "1G"), Expect("none")),),
    ),
]

# ---------------------------------------------------------------------------------------------
# capacity_test.go: Test_capacityPlugin_OnSessionOpenWithHierarchy

H1 = N("n1", 8, "8Gi")
Q1_TREE: dict[str, dict[str, Any]] = {
    "q1": {"capability": {"cpu": 4, "memory": "4Gi"}},
    "q2": {"capability": {"cpu": 4, "memory": "4Gi"}},
    "q11": {"parent": "q1", "capability": {"cpu": 1, "memory": "1Gi"}},
    "q12": {"parent": "q1", "capability": {"cpu": 3, "memory": "3Gi"}},
}
_Q3_QUOTA: dict[str, Any] = {
    "deserved": {"cpu": 2, "memory": "2Gi"},
    "capability": {"cpu": 4, "memory": "4Gi"},
}
Q3_TREE: dict[str, dict[str, Any]] = {  # ``pods`` quotas dropped
    "q3": {"deserved": {"cpu": 4, "memory": "4Gi"}, "capability": {"cpu": 4, "memory": "4Gi"}},
    "q4": dict(_Q3_QUOTA),
    "q31": {"parent": "q3", **_Q3_QUOTA},
    "q32": {"parent": "q3", **_Q3_QUOTA},
}
GPU_NODE = N("n-gpu", 8, "8Gi", gpus=8, gpu_type=GPU)

HIERARCHY = [
    Case(
        "volcano-capacity-hierarchy-leaf-queue",
        # case0: Pod allocatable when queue is leaf queue
        "OnSessionOpenWithHierarchy case0",
        nodes=(H1,),
        queues=Q1_TREE,
        pending=((job("p1", "q11", 1, "1Gi"), Expect("bind", {"n1": 1})),),
    ),
    Case(
        "volcano-capacity-hierarchy-not-leaf-queue",
        # case1: Pod not allocatable when queue is not leaf queue
        "OnSessionOpenWithHierarchy case1",
        nodes=(H1,),
        queues=Q1_TREE,
        pending=((job("p2", "q1", 1, "1Gi"), Expect("none")),),
    ),
    Case(
        "volcano-capacity-hierarchy-within-capability",
        # case2: Pod allocatable when queue has not exceed capability
        "OnSessionOpenWithHierarchy case2",
        nodes=(H1,),
        queues=Q3_TREE,
        pending=((job("pg3", "q31", 2, "2Gi", pods=2), Expect("bind", {"n1": 2})),),
    ),
    Case(
        "volcano-capacity-hierarchy-reclaim-below-deserved",
        # case3: Can reclaim from other queues when allocated < deserved (p6 not preemptable;
        # q4 and q31 are both over their deserved share; p7 it is: evicting p5 of q4 would
        # leave q3 over its capability with the new pod)
        "OnSessionOpenWithHierarchy case3",
        nodes=(H1,),
        queues=Q3_TREE,
        running=(
            Run("p5", "q4", "n1", 4, "4Gi"),
            Run("p6", "q31", "n1", 2, "2Gi", pinned=True),
            Run("p7", "q31", "n1", 2, "2Gi"),
        ),
        pending=((job("p8", "q32", 2, "2Gi"), Expect("pipeline", {"n1": 1}, ("p7",))),),
    ),
    Case(
        "volcano-capacity-hierarchy-ancestor-capability",
        # case4: Pod is not allocatable when ancestor queue's real capability not enough
        "OnSessionOpenWithHierarchy case4",
        nodes=(H1,),
        queues={
            **Q3_TREE,
            "q33": {
                "parent": "q3",
                "deserved": {"cpu": 0, "memory": 0},
                "capability": {"cpu": 4, "memory": "4Gi"},
            },
        },
        running=(
            Run("p6", "q31", "n1", 2, "2Gi", pinned=True),
            Run("p9", "q32", "n1", 2, "2Gi"),
        ),
        pending=((job("p10", "q33", 3, "3Gi"), Expect("none")),),
    ),
    Case(
        "volcano-capacity-hierarchy-inherit-capability",
        # case5: If the capability cpu or memory is not specified, the value should be
        # inherited from parent queue
        "OnSessionOpenWithHierarchy case5",
        nodes=(H1,),
        queues={
            "q5": {"capability": {"memory": "4Gi"}},
            "q51": {"parent": "q5", "capability": {"memory": "2Gi"}},
        },
        pending=((job("p11", "q51", 1, 0), Expect("bind", {"n1": 1})),),
    ),
    Case(
        "volcano-capacity-hierarchy-scalar-deserved",
        # case8: When the queue's deserved value has a scalar resource set, the check can pass
        "OnSessionOpenWithHierarchy case8",
        nodes=(GPU_NODE,),
        queues={
            "q8": {"deserved": {"cpu": 4, "memory": "4Gi", "gpu": 8}},
            "q81": {"parent": "q8", "deserved": {"cpu": 2, "memory": "2Gi", "gpu": 4}},
            "q82": {"parent": "q8", "deserved": {"cpu": 2, "memory": "2Gi", "gpu": 4}},
        },
        pending=(
            (job("p12", "q81", 2, "2Gi", gpus=1, gpu_type=GPU), Expect("bind", {"n-gpu": 1})),
        ),
    ),
    Case(
        "volcano-capacity-hierarchy-inherit-scalar-capability",
        # case11: If the capability scalar resources is not specified, the value should be
        # inherited from parent queue (both jobs bound: the second decided with the first
        # running where it went; n2's hugepages-1Gi: 0 is dropped)
        "OnSessionOpenWithHierarchy case11",
        nodes=(N("n2", 8, "8Gi", gpus=8, gpu_type=GPU),),
        queues={
            "case11_queue1": {},
            "case11_queue11": {
                "parent": "case11_queue1",
                "capability": {"cpu": 4, "memory": "4Gi", "gpu": 4},
            },
            "case11_queue12": {
                "parent": "case11_queue1",
                "capability": {"cpu": 4, "memory": "4Gi", "gpu": 4},
            },
        },
        pending=(
            (
                job("p14", "case11_queue11", 1, "1Gi", gpus=4, gpu_type=GPU),
                Expect("bind", {"n2": 1}),
            ),
            (
                job("p15", "case11_queue12", 1, "1Gi", gpus=4, gpu_type=GPU),
                Expect("bind", {"n2": 1}),
            ),
        ),
    ),
    Case(
        "volcano-capacity-hierarchy-reclaim-within-deserved-scalar",
        # case12: Can reclaim from other queues when allocated <= deserved on a single scalar
        # dimension (p18 not preemptable; rdma/hca dropped)
        "OnSessionOpenWithHierarchy case12",
        nodes=(N("n3", 16, "16Gi", gpus=5, gpu_type=A100),),
        queues={
            "case12_queue1": {"deserved": {"gpu": 2}},
            "case12_queue11": {"parent": "case12_queue1", "deserved": {"gpu": 2}},
            "case12_queue12": {"parent": "case12_queue1"},
        },
        running=(
            Run("p17", "case12_queue12", "n3", 1, "1Gi", gpus=2, gpu_type=A100),
            Run("p18", "case12_queue12", "n3", 1, "1Gi", gpus=2, gpu_type=A100, pinned=True),
        ),
        pending=(
            (
                job("p16", "case12_queue11", 1, "1Gi", gpus=2, gpu_type=A100),
                Expect("pipeline", {"n3": 1}, ("p17",)),
            ),
        ),
    ),
]

# ---------------------------------------------------------------------------------------------
# allocate_test.go: network topology

RACK, BLOCK, SPINE = "rack", "block", "spine"
TASK_SPEC, JOB_SPEC = "volcano.sh/task-spec", "volcano.sh/job-spec"
TOPOLOGY_QUEUES: dict[str, dict[str, Any]] = {"q1": {}}


def _two_racks(t1: str = RACK, t2: str = BLOCK) -> tuple[N, ...]:
    """s0 = {s0-n1, s0-n2} and s1 = {s1-n3, s1-n4} (tier ``t1``) in s2 (tier ``t2``); each node
    2 CPU, 4Gi."""
    racks = {"s0": ("s0-n1", "s0-n2"), "s1": ("s1-n3", "s1-n4")}
    return tuple(
        N(name, 2, "4Gi", domains={t1: rack, t2: "s2"})
        for rack, names in racks.items()
        for name in names
    )


# s0 = {s0-n1}, s1 = {s1-n2} at the one tier; the pod's nodeSelector matches s1-n2 only.
AFFINITY_NODES = (
    N("s0-n1", 2, "4Gi", domains={RACK: "s0"}, cordoned=True),
    N("s1-n2", 2, "4Gi", domains={RACK: "s1"}),
)

BINPACK_NODES = tuple(
    N(f"{rack}-n{i}", 4, "8Gi", domains={RACK: rack, BLOCK: "s3"})
    for rack, i in (("s0", 1), ("s0", 2), ("s1", 3), ("s1", 4), ("s2", 5), ("s2", 6))
)


def _pods(n: int, *, within: str | None = None, soft: bool = False) -> Workload:
    """pg1 of ``n`` pods of 2 CPU, 4G."""
    return job("pg1", "q1", 2, "4G", pods=n, within=within, soft=soft)


TOPOLOGY = [
    Case(
        "volcano-topology-soft-enough-resources",
        # soft network topology constrain, can allocate job when resources are enough
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(3, soft=True), Expect("bind")),),
    ),
    Case(
        "volcano-topology-soft-minavailable-below-replicas",
        # soft network topology constrain, can allocate job when minavailable < replicas
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(2, soft=True), Expect("bind")),),
    ),
    Case(
        "volcano-topology-soft-affinity",
        # soft network topology constrain, two available hyperNodes, can allocate job to nodes
        # with affinity
        "TestAllocateWithNetWorkTopologies",
        nodes=AFFINITY_NODES,
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK,),
        pending=((_pods(1, soft=True), Expect("bind", {"s1-n2": 1})),),
    ),
    Case(
        "volcano-topology-hard-cross-highest-tier",
        # hard network topology constrain, can not allocate job when cross highestTierAllowed
        # tier (highestTierAllowed 1: 3 pods, 2 a hypernode)
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(3, within=RACK), Expect("none")),),
    ),
    Case(
        "volcano-topology-hard-highest-tier-not-reached",
        # hard network topology constrain, can allocate job when highestTierAllowed not reached
        # (highestTierAllowed 2)
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(3, within=BLOCK), Expect("bind", within=BLOCK)),),
    ),
    Case(
        "volcano-topology-hard-multi-hypernodes",
        # hard network topology constrain, can allocate job when multi hyperNodes are available
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(2, within=RACK), Expect("bind", within=RACK)),),
    ),
    Case(
        "volcano-topology-hard-minavailable-below-replicas",
        # hard network topology constrain, can allocate job when minavailable < replicas
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(),
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=((_pods(2, within=RACK), Expect("bind", within=RACK)),),
    ),
    Case(
        "volcano-topology-hard-affinity",
        # hard network topology constrain, two available hyperNodes, can allocate job to nodes
        # with affinity
        "TestAllocateWithNetWorkTopologies",
        nodes=AFFINITY_NODES,
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK,),
        pending=((_pods(1, within=RACK), Expect("bind", {"s1-n2": 1}, within=RACK)),),
    ),
    Case(
        "volcano-topology-tier-name-cross",
        # hard network topology constrain, can not allocate job when cross highestTierName tier
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(TASK_SPEC, JOB_SPEC),
        queues=TOPOLOGY_QUEUES,
        tiers=(TASK_SPEC, JOB_SPEC),
        pending=((_pods(3, within=TASK_SPEC), Expect("none")),),
    ),
    Case(
        "volcano-topology-tier-name-not-reached",
        # hard network topology constrain, can allocate job when the tier corresponding to
        # highestTierName not reached
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(TASK_SPEC, JOB_SPEC),
        queues=TOPOLOGY_QUEUES,
        tiers=(TASK_SPEC, JOB_SPEC),
        pending=((_pods(3, within=JOB_SPEC), Expect("bind", within=JOB_SPEC)),),
    ),
    Case(
        "volcano-topology-tier-name-multi-hypernodes",
        # hard network topology constrain, can allocate job when multi hyperNodes are available
        # (highestTierName volcano.sh/task-spec)
        "TestAllocateWithNetWorkTopologies",
        nodes=_two_racks(TASK_SPEC, JOB_SPEC),
        queues=TOPOLOGY_QUEUES,
        tiers=(TASK_SPEC, JOB_SPEC),
        pending=((_pods(2, within=TASK_SPEC), Expect("bind", within=TASK_SPEC)),),
    ),
    Case(
        "volcano-topology-binpack-under-lca-hypernode",
        # TestHyperNodeBinpackWithNetWorkTopologies: hard network topology constrain, allocate
        # task to node under LCAHyperNode (4 pods of 4 CPU, 8Gi, highestTierAllowed 2; bound 2
        # and 2 in two tier-1 hypernodes)
        "TestHyperNodeBinpackWithNetWorkTopologies",
        nodes=BINPACK_NODES,
        queues=TOPOLOGY_QUEUES,
        tiers=(RACK, BLOCK),
        pending=(
            (
                job("pg1", "q1", 4, "8Gi", pods=4, within=BLOCK),
                Expect("bind", within=BLOCK, per_domain=(2, 2)),
            ),
        ),
    ),
]

CASES = FLAT + ENQUEUE + HIERARCHY + TOPOLOGY


def _param(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_volcano_case(case: Case) -> None:
    snap = _snapshot(case)
    assert problems(snap) == []
    fleet = view_of(snap)
    view = fleet.clusters[CLUSTER]
    for w, want in case.pending:
        d = admit(w, fleet)
        try:
            _check(d, w, want, view)
        except AssertionError as e:
            raise AssertionError(f"{case.source}, {w.name}: {e}") from None
        if d.verdict == Verdict.ADMIT:
            a = d.clusters[0].assignment
            assert a is not None
            _hold(view, w, a.nodes)
