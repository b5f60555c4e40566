"""Replaying gangs over time on a fleet: all-or-nothing jobs of N pods × G GPUs arrive, wait in
their queue until they fit, run for their duration and leave — placed by the scheduler's own
decisions or by a baseline, on the same fleet, the same arrivals and the same queue rules.

Every attempt asks :func:`gangway.scheduling.placement.place` (admission: the team's queue and
quota, the model, the tier the gang must stay within, whole-gang fit). Where it admits:

* **gangway** takes the placement as it is: the closest tier whose one domain holds the whole
  gang, the best-fitting domain there, nodes by the packing rule
  (:func:`gangway.scheduling.capacity.assign`) — what a Volcano Job would carry;
* **binpack** — Volcano-like: the first domain (by name) at the gang's tier that can hold it
  (the whole cluster when it has none), its nodes most-allocated first;
* **random**: a domain drawn uniformly among those at the gang's tier that can hold it, its
  nodes in random order.

The queue is first come, first served with backfill: at each arrival or departure, the pending
gangs are tried in arrival order and each that fits starts (as Volcano's allocate action walks
a queue's jobs, skipping the ones that do not fit). Nothing is evicted: a decision that would
need preemption waits.

Per gang it records the queue wait (arrival → start), the tier of the tightest domain holding
all its pods, the tightest tier where some domain could have held it at that moment, and
whether it ever waited while the fleet had enough GPUs of its model free in total (by
fragmentation: across nodes, or across domains when its pods fit on nodes but no one domain);
over time, the GPUs allocated.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gangway.scheduling.admission import Verdict
from gangway.scheduling.capacity import ClusterView, fill, fit, pod_shape, view_of
from gangway.scheduling.packing import Profile, Shape
from gangway.scheduling.placement import place
from gangway.scheduling.simulation.fleet import CPU_PER_GPU, MEMORY_PER_GPU_GI, Fleet
from gangway.scheduling.simulation.gang_workload import GangJob
from gangway.scheduling.snapshot.cluster_state import Amount, Gang
from gangway.scheduling.workload import Workload

__all__ = ["GANG_POLICIES", "GangRecord", "GangRun", "replay_gangs"]

GANG_POLICIES = ("gangway", "binpack", "random")

Ints = npt.NDArray[np.int64]


@dataclass
class GangRecord:
    job: GangJob
    start_s: float | None = None
    tier: int | None = None
    """Index of the closest tier one of whose domains holds all its pods (len(tiers): only
    the whole cluster does)."""
    tightest: int | None = None
    """The closest tier where some domain could hold it when it started."""
    waited_with_room: bool = False
    """It waited at some moment when enough GPUs of its model were free in total."""
    across_domains: bool = False
    """… and its pods fitted on free nodes then, only not in one domain at its tier."""

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.job.arrival_s


@dataclass
class GangRun:
    policy: str
    seed: int
    capacity: int
    horizon_s: int
    records: list[GangRecord]
    times: list[float] = field(default_factory=list)
    allocated: list[int] = field(default_factory=list)
    """GPUs allocated from each of ``times`` until the next."""
    decisions: int = 0
    seconds: float = 0.0
    """Spent in placement decisions."""


Chooser = Callable[[ClusterView, Ints, int, int | None, np.random.Generator], dict[int, int]]


def _domains_that_fit(view: ClusterView, counts: Ints, pods: int, tier: int | None) -> Ints:
    """Per node, the id of its domain at ``tier`` when that domain can hold ``pods`` pods,
    else −1 (``tier`` None: the whole cluster is one domain)."""
    if tier is None:
        return np.where(counts.sum() >= pods, 0, -1) + np.zeros(len(counts), dtype=np.int64)
    ids = view.domains[tier].astype(np.int64)
    cap = np.bincount(ids, weights=counts, minlength=len(view.domain_names[tier]))
    return np.where(cap[ids] >= pods, ids, -1)


def _binpack(
    view: ClusterView, counts: Ints, pods: int, tier: int | None, _: np.random.Generator
) -> dict[int, int]:
    ok = _domains_that_fit(view, counts, pods, tier)
    names = view.domain_names[tier] if tier is not None else ["cluster"]
    first = min((int(d) for d in np.unique(ok[ok >= 0])), key=lambda d: names[d])
    members = np.flatnonzero((ok == first) & (counts > 0))
    gpus = view.free[members, 2]
    return fill(counts, members[np.lexsort((members, gpus))], pods)


def _random(
    view: ClusterView, counts: Ints, pods: int, tier: int | None, rng: np.random.Generator
) -> dict[int, int]:
    ok = _domains_that_fit(view, counts, pods, tier)
    chosen = rng.choice(np.unique(ok[ok >= 0]))
    members = np.flatnonzero((ok == chosen) & (counts > 0))
    return fill(counts, rng.permutation(members), pods)


BASELINES: dict[str, Chooser] = {"binpack": _binpack, "random": _random}


def _enclosing_tier(view: ClusterView, nodes: Sequence[int]) -> int:
    rows = np.asarray(nodes)
    for t in range(len(view.state.tiers)):
        if len(np.unique(view.domains[t][rows])) == 1:
            return t
    return len(view.state.tiers)


def _tightest(view: ClusterView, counts: Ints, pods: int) -> int:
    for t in range(len(view.state.tiers)):
        if int((_domains_that_fit(view, counts, pods, t) >= 0).sum()):
            return t
    return len(view.state.tiers)


class _Replay:
    def __init__(self, fleet: Fleet, jobs: Sequence[GangJob], policy: str, seed: int) -> None:
        self.fleet = fleet
        self.policy = policy
        self.rng = np.random.default_rng(seed)
        self.snap = view_of(fleet.snapshot.model_copy(deep=True))
        self.view = self.snap.clusters[fleet.cluster]
        self.running: dict[int, Gang] = {}
        self.decisions = 0
        self.seconds = 0.0
        mix: dict[Shape, float] = {}
        for j in jobs:  # the workload's own mix of pod shapes, as the trace replay's profile
            shape = pod_shape(self.workload(j).per_pod, self.model(j))
            mix[shape] = mix.get(shape, 0.0) + j.pods
        self.view.expect(Profile.weighted(mix))

    def model(self, j: GangJob) -> str:
        return j.gpu_model or next(iter(self.fleet.gpus))

    def workload(self, j: GangJob) -> Workload:
        per = Amount.model_validate(
            {
                "cpu": CPU_PER_GPU * j.gpus_per_pod,
                "memory": MEMORY_PER_GPU_GI * 2**30 * j.gpus_per_pod,
                "gpus": j.gpus_per_pod,
            }
        )
        team = j.team or (self.fleet.teams[0] if self.fleet.teams else None)
        return Workload(j.name, j.pods, per, team=team, gpu_type=self.model(j), within=j.within)

    def free_gpus(self, model: str) -> int:
        mask = self.view.gpu_type == self.view.types.get(model, -2)
        return int(self.view.free[mask, 2].sum())

    def try_start(self, i: int, rec: GangRecord, now: float) -> bool:
        j = rec.job
        w = self.workload(j)
        room = self.free_gpus(str(w.gpu_type)) >= j.gpus
        if not room:
            return False  # not enough GPUs anywhere: a plain capacity wait, no decision needed
        started = time.perf_counter()
        p = place(w, self.snap, cluster=self.fleet.cluster)
        option = p.chosen
        nodes: dict[int, int] | None = None
        counts = fit(self.view, w.per_pod, w.gpu_type)
        a = option.decision.assignment if option is not None else None
        if a is not None and option is not None and option.decision.verdict == Verdict.ADMIT:
            if self.policy == "gangway":
                nodes = a.nodes
            else:
                tiers = self.view.state.tiers
                tier = tiers.index(j.within) if j.within else None
                nodes = BASELINES[self.policy](self.view, counts, j.pods, tier, self.rng)
        self.seconds += time.perf_counter() - started
        self.decisions += 1
        if nodes is None:
            rec.waited_with_room = True
            rec.across_domains = rec.across_domains or int(counts.sum()) >= j.pods
            return False
        rec.tightest = _tightest(self.view, counts, j.pods)
        rec.tier = _enclosing_tier(self.view, list(nodes))
        resolved = p.decision.workload
        gang = Gang(
            name=j.name,
            queue=str(resolved.queue),
            priority_class=resolved.priority_class,
            pods=j.pods,
            per_pod=w.per_pod,
            gpu_type=w.gpu_type,
        )
        self.running[i] = self.view.hold(gang, nodes)
        rec.start_s = now
        return True

    def allocated(self) -> int:
        return int(self.view.allocatable[:, 2].sum() - self.view.free[:, 2].sum())


def replay_gangs(
    fleet: Fleet,
    jobs: Sequence[GangJob],
    policy: str,
    *,
    seed: int,
    horizon_s: int,
    progress: Callable[[int], None] | None = None,
) -> GangRun:
    """Replay ``jobs`` (in arrival order) on ``fleet`` with ``policy`` (one of
    :data:`GANG_POLICIES`) until ``horizon_s``; see the module docstring. Gangs arriving
    after the horizon are left out (they would count as waits of negative length)."""
    jobs = [j for j in jobs if j.arrival_s <= horizon_s]
    r = _Replay(fleet, jobs, policy, seed)
    records = [GangRecord(j) for j in jobs]
    events: list[tuple[float, int, int]] = [(j.arrival_s, 1, i) for i, j in enumerate(jobs)]
    heapq.heapify(events)
    run = GangRun(policy, seed, sum(fleet.gpus.values()), horizon_s, records)
    pending: list[int] = []
    arrived = 0
    while events and events[0][0] <= horizon_s:
        now = events[0][0]
        freed, new = False, []
        while events and events[0][0] == now:
            _, kind, i = heapq.heappop(events)
            if kind == 0:
                r.view.release(r.running.pop(i))
                freed = True
            else:
                pending.append(i)
                new.append(i)
        arrived += len(new)
        # after a departure every pending gang may fit; after arrivals only the new ones can
        for i in list(pending) if freed else new:
            if r.try_start(i, records[i], now):
                pending.remove(i)
                heapq.heappush(events, (now + jobs[i].duration_s, 0, i))
        run.times.append(now)
        run.allocated.append(r.allocated())
        if progress is not None and new:
            progress(len(new))
    run.decisions, run.seconds = r.decisions, r.seconds
    return run
