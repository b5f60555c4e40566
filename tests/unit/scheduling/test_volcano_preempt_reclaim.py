"""Volcano's own preempt, reclaim and gang test tables, replayed through :func:`admit`.

Each case below rebuilds one table entry of Volcano's scheduler unit tests as a Gangway
snapshot and a pending gang, and checks that Gangway predicts what the upstream test asserts:
which running pods are evicted (by name, or none) and whether the pending job gets to run.
Where Gangway disagrees, the case keeps the upstream expectation and is a strict ``xfail`` that
says what Gangway does instead.

Sources (read from the stored copies of ``volcano-sh/volcano``; the store holds several
versions of each file, none tagged, so the cases are the union of the versions that look like
upstream):

* ``pkg/scheduler/actions/preempt/preempt_test.go`` — ``TestPreempt`` of what looks like a
  release branch (13 cases; its last one backports "the fix in #5214 (SelectVictimsOnNode in
  master)", so it is taken as the closest to v1.15.x), plus the master line's extra
  ``TestPreempt`` cases (rollback over the queue capability, commit only the succeeding node)
  and ``TestTopologyAwarePreempt`` (the same table again with ``enableTopologyAwarePreemption``,
  plus an anti-affinity case). The master-line copies are likely newer than v1.15.1.
* ``pkg/scheduler/actions/reclaim/reclaim_test.go`` — ``TestReclaim`` (6 cases in every stored
  copy; one copy adds 3) and ``TestReclaimWithNodeSelector`` (3, in another copy).
* ``pkg/scheduler/plugins/gang/gang.go`` (its ``JobReady``/``JobValid`` rules: no table) and
  ``gang_test.go`` (``TestOnSessionCloseConditions``, 5 cases about PodGroup conditions).

How a Volcano test becomes a Gangway scenario:

* A PodGroup with ``minMember`` 0 or 1 is no gang: each of its pods is a gang of its own, named
  after the pod, so "evict preemptee1 but not preemptee2" stays expressible. A pending job is a
  gang of its ``minMember`` pods (the pods Volcano must place at once).
* Gangway's running gangs all ask 64Gi a pod, so one upstream "G" of memory is 64Gi here; a pod
  of k CPUs and k G is k pods of one CPU on its node (the same gang). Nodes and queue
  quotas scale the same way.
* Upstream reclaim tests use the ``proportion`` plugin, which works each queue's deserved share
  out of the queue weights and requests; Gangway follows the ``capacity`` plugin, so each case
  sets the deserved share proportion would have computed (worked out in its comment).
* **Stand-in for ``volcano.sh/preemptable: "false"``**: Gangway has no per-gang "never evict"
  flag, so such a pod runs as a gang of class ``pinned`` (priority above every preemptor).
  Within one queue (preempt) this makes it no candidate, as the annotation does; across queues
  (reclaim) it only puts it last, so a reclaim case using it checks victim order, not the
  annotation. Likewise a pod whose own ``priority`` differs from its job's is a gang of that
  priority.

Not translated (what Gangway cannot express):

preempt_test.go
  - ``do not preempt if job is pipelined``: a job already running its ``minMember`` pods is not
    starving, so Volcano does not preempt for its extra pending pod. Gangway has no partly
    running gang (running pods and pending pods of one Job).
  - ``unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue`` and
    ``BestEffort high-priority pod preempt BestEffort low-priority pod in same queue`` (#3335):
    a node's ``pods`` capacity (max pods per node) and pods that request nothing (BestEffort);
    Gangway counts only CPU, memory and GPUs and rejects a gang that requests nothing.
  - ``preempt low-priority pod when high-priority pod has PodAntiAffinity conflict``
    (``TestTopologyAwarePreempt``): pod anti-affinity.
  - ``TestGangPreempt`` (13 cases, ``minimal mode: ...`` / ``atomic mode: ...`` and others;
    in one stored version only): the preempt action's ``gangPreemptionMode`` argument, which no
    stored ``preempt.go`` has (a pull request's), and the test's own node-order scores
    (n1 = -1, n2 = -2, ...). Gangway models the default pod-by-pod preempt.
  - ``TestPreemptCreditFastPathReusesFreedResources``,
    ``TestPreemptGroupEvictionPolicyCreditsAcrossNodes``,
    ``TestPreemptLauncherOnScalarQueueViaNormalPreempt`` (in one stored version, citing "#9" of a
    fork): MIG scalar resources (``nvidia.com/mig-3g.40gb``) on queues and nodes, the
    ``volcano.sh/group-eviction-policy`` annotation, and a gang whose pods differ in shape
    (a CPU-only launcher with a MIG worker).

reclaim_test.go
  - ``sort reclaimees when reclaiming from overusing queues with different queue priority``:
    the queue's ``priority`` (spec.priority) ordering victims across queues; Gangway has no
    queue priority.
  - ``can not reclaim resources when queue is not open(proportion plugin)`` and
    ``...(capacity plugin)``: a closed queue (``state: Closed``).
  - ``Reclaim succeeds for second task when first task has PreemptionPolicy=Never``: pods of one
    job with different ``preemptionPolicy`` (and ``minMember`` 2 over both).
  - ``TestReclaimWithNodeSelector`` (3 cases: ``reclaim on full node with matching nodeSelector,
    skip non-matching node``, ``no reclaim when all nodes are structurally incompatible with
    nodeSelector``, ``reclaim only on matching node when mixed matching and non-matching nodes
    are full``): a node selector on the job.

gang plugin
  - ``TestOnSessionCloseConditions`` (5 cases: ``inqueue job waiting for gang should not set
    unschedulable``, ``inqueue job with fit errors should set unschedulable``, ``inqueue job
    blocked by external scheduling gates should set unschedulable``, ``pending job should set
    unschedulable``, ``ready job should set scheduled``): the PodGroup conditions the plugin
    writes when the session closes, fit errors and scheduling gates; Gangway predicts verdicts,
    not PodGroup status.
  - ``gang.go``'s ``preemptableFn`` (a victim job keeps ``minMember`` ready pods): the rendered
    scheduler config turns it off, and Gangway models that config, so no case checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from gangway.scheduling.admission import Verdict, admit
from gangway.scheduling.snapshot.build import ClusterBuilder, SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Amount, Snapshot
from gangway.scheduling.workload import Workload

GI = 64
"""Gi of memory that stand for one upstream "G" (what a running pod asks here)."""

NONE, LOW, HIGH, PINNED = "no-priority", "low-priority", "high-priority", "pinned"
NEVER = "high-priority-never"
"""``high-priority`` with ``preemptionPolicy: Never``."""
PREEMPT_CLASSES = {NONE: 0, LOW: 10, HIGH: 100000, NEVER: 100000, PINNED: 10**9}
"""The classes of ``TestPreempt`` (low 10, high 100000), the stand-ins and a class-less 0."""


def _mem(units: float) -> str:
    return f"{round(units * GI)}Gi"


def _quota(cpu: int | str, units: float) -> dict[str, Any]:
    """CPU (cores, or ``1500m``) and ``units`` upstream G of memory."""
    return {"cpu": cpu, "memory": _mem(units)}


def _cluster(
    queues: Mapping[str, Mapping[str, Any]],
    classes: Mapping[str, int] = PREEMPT_CLASSES,
    *,
    never: tuple[str, ...] = (NEVER,),
) -> tuple[SnapshotBuilder, ClusterBuilder]:
    """A cluster ``c1`` with ``queues`` (name → ``ClusterBuilder.queue`` arguments), a team per
    queue of the same name that may use every class."""
    b = SnapshotBuilder()
    for name, value in classes.items():
        b.priority(name, value, preempting=name not in never)
    for q in queues:
        b.team(q, queue=q, classes=list(classes))
    c = b.cluster("c1")
    for q, args in queues.items():
        c.queue(q, **args)
    return b, c


def _node(c: ClusterBuilder, name: str, cpu: int, units: float) -> None:
    """A CPU node of ``cpu`` cores and ``units`` upstream G of memory."""
    c.node(name, gpu_type=None, gpus=0, cpu=cpu, memory_gi=round(units * GI))


def _pod(c: ClusterBuilder, name: str, queue: str, cls: str | None, node: str, k: int = 1) -> None:
    """A running pod of ``k`` CPUs and ``k`` G on ``node``, as a gang of its own."""
    c.running(
        name,
        queue=queue,
        pods=k,
        gpus=0,
        gpu_type=None,
        cpu=1,
        priority_class=cls,
        nodes=[node] * k,
    )


def _wants(queue: str, cls: str, cpu: int = 1, units: float = 1, pods: int = 1) -> Workload:
    """The pending job: ``pods`` pods of ``cpu`` cores and ``units`` G each."""
    return Workload(
        name="preemptor",
        pods=pods,
        per_pod=Amount(cpu=cpu, memory=_mem(units), gpus=0),
        team=queue,
        queue=queue,
        priority_class=cls,
    )


@dataclass(frozen=True)
class Case:
    id: str
    snapshot: Callable[[], Snapshot]
    workload: Workload
    verdict: Verdict
    evicted: frozenset[str] = frozenset()
    """The running gangs (upstream: pods) the upstream test expects evicted."""
    action: str | None = None
    """``preempt`` or ``reclaim``: the rule every victim is taken under."""
    xfail: str | None = None


# --- preempt_test.go: TestPreempt ----------------------------------------------------------


def _enough_idle() -> Snapshot:
    # pg1 (minMember 3): 2 pods running on a 10-CPU node; its third pod is the pending one
    # (Gangway: a gang of its own; it has no partly running gang).
    b, c = _cluster({"q1": {}})
    _node(c, "n1", 10, 10)
    c.running("pg1", queue="q1", pods=2, gpus=0, gpu_type=None, cpu=1, nodes=["n1", "n1"])
    return b.build()


def _one_task_of_other_job() -> Snapshot:
    b, c = _cluster({"q1": {}})
    _node(c, "n1", 2, 2)
    _pod(c, "preemptee1", "q1", LOW, "n1")
    _pod(c, "preemptee2", "q1", PINNED, "n1")  # preemptable: false
    return b.build()


def _large_task() -> Snapshot:
    b, c = _cluster({"q1": {}})
    _node(c, "n1", 6, 6)
    _pod(c, "preemptee1", "q1", LOW, "n1")
    _pod(c, "preemptee2", "q1", LOW, "n1")
    _pod(c, "preemptee3", "q1", PINNED, "n1")  # preemptable: false
    return b.build()


def _same_queue(capability: int) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        # #3161: a 3-CPU low pod; the queue's capability decides whether it must go.
        b, c = _cluster({"q1": {"capability": _quota(capability, capability)}})
        _node(c, "n1", 12, 12)
        _pod(c, "preemptee1", "q1", LOW, "n1", k=3)
        return b.build()

    return build


def _not_preemptable_or_higher() -> Snapshot:
    # #2232: pg1 (low) fills the queue's capability of 3 with one pod preemptable: false, one
    # preemptable, and one whose own priority is high-priority.
    b, c = _cluster({"q1": {"capability": _quota(3, 3)}})
    _node(c, "n1", 12, 12)
    _pod(c, "preemptee1", "q1", PINNED, "n1")  # preemptable: false
    _pod(c, "preemptee2", "q1", LOW, "n1")
    _pod(c, "preemptee3", "q1", HIGH, "n1")  # pod priority high-priority
    return b.build()


def _policy_never() -> Snapshot:
    # #3642: the preemptor's pod has preemptionPolicy: Never (here: its class says so).
    b, c = _cluster({"q1": {}})
    _node(c, "n1", 1, 1)
    _pod(c, "preemptee1", "q1", LOW, "n1")
    return b.build()


def _multi_queue() -> Snapshot:
    # q1 runs a class-less job and has no preemptor; q2 (capability 4) runs a low job and has
    # the high preemptor. The node is full.
    b, c = _cluster({"q1": {}, "q2": {"capability": _quota(4, 4)}})
    _node(c, "n1", 2, 2)
    _pod(c, "q1-runner1", "q1", None, "n1")
    _pod(c, "q2-preemptee1", "q2", LOW, "n1")
    return b.build()


def _priority_queues() -> Snapshot:
    # q1 (queue priority 1) and q2 (queue priority 10), each deserved and capped at 1 CPU, 1G.
    one = {"deserved": _quota(1, 1), "capability": _quota(1, 1)}
    b, c = _cluster({"q1": one, "q2": one})
    _node(c, "n1", 2, 2)
    _pod(c, "preemptee2", "q2", HIGH, "n1")
    _pod(c, "preemptee1", "q1", LOW, "n1")
    return b.build()


def _lowest_priority_first() -> Snapshot:
    # pg1 (low) holds the queue's capability of 2 with two pods of different pod priorities.
    b, c = _cluster({"q1": {"capability": _quota(2, 2)}})
    _node(c, "n1", 12, 12)
    _pod(c, "victim-low-prio", "q1", LOW, "n1")
    _pod(c, "victim-high-prio", "q1", HIGH, "n1")
    return b.build()


def _rollback_over_capability() -> Snapshot:
    # The preemptor asks 4 CPU of a queue capped at 3: no eviction can let it run.
    b, c = _cluster({"q1": {"capability": _quota(3, 3)}})
    _node(c, "n1", 10, 10)
    _pod(c, "preemptee1", "q1", LOW, "n1")
    _pod(c, "preemptee2", "q1", LOW, "n1")
    return b.build()


def _only_succeeding_node() -> Snapshot:
    # Capability 6, 5 used. Evicting preemptee1 (1 CPU on n1) leaves 4 + 3 > 6; evicting
    # preemptee2 (4 CPU on n2) leaves 1 + 3 <= 6 and room on n2.
    b, c = _cluster({"q1": {"capability": _quota(6, 6)}})
    _node(c, "n1", 3, 3)
    _node(c, "n2", 4, 4)
    _pod(c, "preemptee1", "q1", LOW, "n1")
    _pod(c, "preemptee2", "q1", LOW, "n2", k=4)
    return b.build()


PREEMPT = [
    # TestPreempt: "do not preempt if there are enough idle resources"
    Case("enough-idle-resources", _enough_idle, _wants("q1", NONE), Verdict.ADMIT),
    # TestPreempt: "preempt one task of different job to fit both jobs on one node"
    # (pg2 has 2 pods, minMember 1: one must be placed)
    Case(
        "one-task-of-different-job",
        _one_task_of_other_job,
        _wants("q1", HIGH),
        Verdict.PREEMPT,
        frozenset({"preemptee1"}),
        "preempt",
    ),
    # TestPreempt: "preempt enough tasks to fit large task of different job"
    Case(
        "enough-tasks-for-large-task",
        _large_task,
        _wants("q1", HIGH, cpu=5, units=5),
        Verdict.PREEMPT,
        frozenset({"preemptee1", "preemptee2"}),
        "preempt",
    ),
    # TestPreempt: "preempt low priority job in same queue" (#3161)
    Case(
        "low-priority-job-in-same-queue",
        _same_queue(4),
        _wants("q1", HIGH, cpu=3, units=3),
        Verdict.PREEMPT,
        frozenset({"preemptee1"}),
        "preempt",
    ),
    # TestPreempt: "preempt low priority job in same queue: allocatable and has enough
    # resource, don't preempt" (#3161)
    Case(
        "same-queue-allocatable-no-preempt",
        _same_queue(6),
        _wants("q1", HIGH, cpu=3, units=3),
        Verdict.ADMIT,
    ),
    # TestPreempt: "preempt low priority job in same queue" (#2232; on master: "... but not pod
    # with preemptable=false or higher priority")
    Case(
        "not-preemptable-or-higher-priority-pod",
        _not_preemptable_or_higher,
        _wants("q1", HIGH),
        Verdict.PREEMPT,
        frozenset({"preemptee2"}),
        "preempt",
    ),
    # TestPreempt: "can not preempt resources when task preemption policy is never" (#3642)
    Case("preemption-policy-never", _policy_never, _wants("q1", NEVER), Verdict.WAIT),
    # TestPreempt: "multi-queue: preemptorTasks must not be overwritten by intra-job preemption
    # of another queue"
    Case(
        "multi-queue-preemptor-tasks",
        _multi_queue,
        _wants("q2", HIGH),
        Verdict.PREEMPT,
        frozenset({"q2-preemptee1"}),
        "preempt",
    ),
    # TestPreempt (release-branch copy; TestTopologyAwarePreempt in a master copy): "preemption
    # with priority queues"
    Case(
        "priority-queues",
        _priority_queues,
        _wants("q1", HIGH),
        Verdict.PREEMPT,
        frozenset({"preemptee1"}),
        "preempt",
    ),
    # TestPreempt (release-branch copy): "evict lowest priority victim first to spare higher
    # priority pods"
    Case(
        "evict-lowest-priority-victim-first",
        _lowest_priority_first,
        _wants("q1", HIGH),
        Verdict.PREEMPT,
        frozenset({"victim-low-prio"}),
        "preempt",
    ),
    # TestPreempt (master): "rollback evictions when preemptor exceeds queue capacity after
    # evicting victims"
    Case(
        "rollback-over-queue-capability",
        _rollback_over_capability,
        _wants("q1", HIGH, cpu=4, units=4),
        Verdict.REJECT,
    ),
    # TestPreempt (master): "only commit evictions on the node where preemption succeeds"
    Case(
        "only-commit-succeeding-node",
        _only_succeeding_node,
        _wants("q1", HIGH, cpu=3, units=3),
        Verdict.PREEMPT,
        frozenset({"preemptee2"}),
        "preempt",
    ),
]

TOPOLOGY_AWARE = {
    "enough-idle-resources",
    "one-task-of-different-job",
    "enough-tasks-for-large-task",
    "low-priority-job-in-same-queue",
    "same-queue-allocatable-no-preempt",
    "not-preemptable-or-higher-priority-pod",
    "preemption-policy-never",
    "priority-queues",
}
"""The cases master's TestTopologyAwarePreempt repeats with topology-aware preemption on (the
same expectations; Gangway has one way to choose victims)."""


# --- reclaim_test.go: TestReclaim ------------------------------------------------------------

RECLAIM_CLASSES = {"low-priority": 100, "mid-priority": 500, "high-priority": 1000, PINNED: 10**9}
"""The classes of TestReclaim's sorting cases."""


def _overusing() -> Snapshot:
    # proportion over 3 CPU, 3Gi, weights 1:1: q2 asks 1 → deserves 1; q1 deserves the rest, 2
    # (it uses 3).
    b, c = _cluster({"q1": {"deserved": _quota(2, 2)}, "q2": {"deserved": _quota(1, 1)}})
    _node(c, "n1", 3, 3)
    _pod(c, "preemptee1", "q1", PINNED, "n1")  # preemptable: false
    _pod(c, "preemptee2", "q1", LOW, "n1")
    _pod(c, "preemptee3", "q1", PINNED, "n1")  # preemptable: false
    return b.build()


def _sort_reclaimees() -> Snapshot:
    # proportion over 4 CPU, weights 1:1:1: q3 asks 1 → deserves 1; q1 and q2 share the other 3
    # (1.5 each; each uses 2).
    half = {"deserved": _quota("1500m", 1.5)}
    b, c = _cluster(
        {"q1": half, "q2": half, "q3": {"deserved": _quota(1, 1)}},
        RECLAIM_CLASSES,
    )
    _node(c, "n1", 4, 4)
    _pod(c, "preemptee1-1", "q1", "mid-priority", "n1")
    _pod(c, "preemptee1-2", "q1", "mid-priority", "n1")
    _pod(c, "preemptee2-1", "q2", "low-priority", "n1")
    _pod(c, "preemptee2-2", "q2", PINNED, "n1")  # preemptable: false
    return b.build()


def _reclaim_policy_never() -> Snapshot:
    # proportion over 1 CPU, weights 5:10: q1 deserves 1/3, q2 2/3.
    b, c = _cluster(
        {
            "q1": {"weight": 5, "deserved": _quota("334m", 1 / 3)},
            "q2": {"weight": 10, "deserved": _quota("667m", 2 / 3)},
        },
        {"low-priority": 100, NEVER: 1000},
    )
    _node(c, "n1", 1, 1)
    _pod(c, "preemptee1", "q1", "low-priority", "n1")
    return b.build()


def _idle_included() -> Snapshot:
    # A 10-CPU node with 2Gi (2.15 G): two 1 CPU, 1G pods leave CPU but not the 1G the
    # preemptor (2 CPU, 1G) needs. proportion, weights 1:1:3 over 10 CPU, 2.15 G: q3 asks
    # 2 CPU, 1G and deserves them; q1 and q2 deserve 1 CPU and 0.57 G each (each uses 1 G).
    little = {"deserved": _quota(1, 0.57)}
    b, c = _cluster(
        {"q1": little, "q2": little, "q3": {"weight": 3, "deserved": _quota(2, 1)}},
        RECLAIM_CLASSES,
    )
    _node(c, "n1", 10, 2.147)
    _pod(c, "preemptee1-1", "q1", "mid-priority", "n1")
    _pod(c, "preemptee2-1", "q2", "mid-priority", "n1")
    return b.build()


def _succeeding_node() -> Snapshot:
    # proportion over 4 CPU, weights 1:1: q2 asks 2 → deserves 2; q1 deserves 2 (uses 3).
    # victim-n1 (1 CPU) fills n1 (1 CPU): evicting it cannot make room for a 2-CPU pod;
    # victim-n2 (2 CPU) leaves n2 (3 CPU) with 1 idle: evicting it does.
    two = {"deserved": _quota(2, 2)}
    b, c = _cluster({"q1": two, "q2": two})
    _node(c, "n1", 1, 1)
    _node(c, "n2", 3, 3)
    _pod(c, "victim-n1", "q1", LOW, "n1")
    _pod(c, "victim-n2", "q1", LOW, "n2", k=2)
    return b.build()


RECLAIM = [
    # TestReclaim: "Two Queue with one Queue overusing resource, should reclaim"
    Case(
        "queue-overusing-resource",
        _overusing,
        _wants("q2", HIGH),
        Verdict.PREEMPT,
        frozenset({"preemptee2"}),
        "reclaim",
    ),
    # TestReclaim: "sort reclaimees when reclaiming from overusing queue"
    Case(
        "sort-reclaimees-overusing-queue",
        _sort_reclaimees,
        _wants("q3", "high-priority"),
        Verdict.PREEMPT,
        frozenset({"preemptee2-1"}),
        "reclaim",
    ),
    # TestReclaim: "can not reclaim resources when task preemption policy is never" (#3642)
    Case("preemption-policy-never", _reclaim_policy_never, _wants("q2", NEVER), Verdict.WAIT),
    # TestReclaim (the copy with 9 cases): "Node available resources should be included in reclaimed
    # resources". Upstream takes q1's pod for q1's lower queue priority; Gangway has no queue
    # priority and breaks the tie by name, which lands on the same pod.
    Case(
        "node-idle-resources-included",
        _idle_included,
        _wants("q3", "mid-priority", cpu=2, units=1),
        Verdict.PREEMPT,
        frozenset({"preemptee1-1"}),
        "reclaim",
    ),
    # TestReclaim (the copy with 9 cases): "only evict victims from the node where reclaim actually
    # succeeds"
    Case(
        "only-evict-on-succeeding-node",
        _succeeding_node,
        _wants("q2", HIGH, cpu=2, units=2),
        Verdict.PREEMPT,
        frozenset({"victim-n2"}),
        "reclaim",
    ),
]


# --- gang.go ---------------------------------------------------------------------------------


def _gang_room() -> Snapshot:
    # Two 2-CPU nodes; a high-priority pod holds one CPU of n2: 3 CPU free (2 on n1, 1 on n2).
    b, c = _cluster({"q1": {}})
    _node(c, "n1", 2, 2)
    _node(c, "n2", 2, 2)
    _pod(c, "peer", "q1", HIGH, "n2")
    return b.build()


GANG = [
    # gang.go JobReadyFn (job.Ready(): ready pods >= minAvailable): allocate keeps a gang's
    # placements only once all its minAvailable pods have one — 4 pods with room for 3 bind
    # none, and as the only other pod is of the same priority, nothing is evicted.
    Case(
        "job-ready-needs-min-available",
        _gang_room,
        _wants("q1", HIGH, pods=4),
        Verdict.WAIT,
    ),
    # gang.go JobReadyFn: the gang is ready when all its pods are placed, on whichever nodes —
    # 3 pods with room for 2 on n1 and 1 on n2 all start.
    Case(
        "job-ready-across-nodes",
        _gang_room,
        _wants("q1", HIGH, pods=3),
        Verdict.ADMIT,
    ),
]


def _params() -> list[Any]:
    out: list[Any] = []
    groups = [
        ("preempt", PREEMPT),
        ("preempt-topology-aware", [c for c in PREEMPT if c.id in TOPOLOGY_AWARE]),
        ("reclaim", RECLAIM),
        ("gang", GANG),
    ]
    for prefix, cases in groups:
        for case in cases:
            marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
            out.append(pytest.param(case, id=f"volcano-{prefix}-{case.id}", marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_volcano_table(case: Case) -> None:
    decision = admit(case.workload, case.snapshot())
    assert decision.verdict == case.verdict, decision.reason
    plan = decision.clusters[0].preemption
    victims = plan.victims if plan is not None and decision.verdict == Verdict.PREEMPT else ()
    assert frozenset(v.gang.name for v in victims) == case.evicted, decision.reason
    if victims:
        assert plan is not None and plan.volcano_acts
        assert all(v.rule.startswith(f"{case.action}:") for v in victims), [v.rule for v in victims]


def test_the_tables_have_distinct_ids() -> None:
    ids = [p.id for p in _params()]
    assert len(ids) == len(set(ids))
