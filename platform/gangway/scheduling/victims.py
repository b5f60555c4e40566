"""Which running gangs to evict, node by node, so that a gang's pods fit — the search behind
:func:`gangway.scheduling.preemption.plan_preemption` (which says *who may* be evicted; this
module says *which* of them, and does it in arrays).

Volcano's preempt and reclaim actions work node by node: on a node the pending pod could run
on, they walk the victims there in victim order and evict until the pod fits. Gangway plans
the same way, and picks the nodes:

* **The table** (:class:`VictimTable`, built once per cluster view and ``now``): every running
  gang's pods by node, each node's in victim order — lowest priority first, then cheapest to
  lose (GPU-hours since the last checkpoint; unknown after every known), then by key.
* **What could ever be freed**, in arrays, per decision: for every node, the pod slots of the
  gang's shape it would have after evicting each prefix of its allowed victims (those the
  caller's masks allow; the ones that free what the gang is short of first). A topology domain
  — at the tier the gang must stay within, else the whole cluster — that could not hold the
  gang with every allowed victim gone is out at once: a gang no eviction can start is answered
  without a walk.
* **The walk**, over the domains that could hold the gang, most promising first (a bound on
  the lowest priority a plan there must evict, then the loss and victims of a whole-node
  estimate): the cheapest next step is taken — the shortest prefix of one node's victims that
  gives that node one more pod slot, ranked by the highest priority it evicts, then unknown
  losses, GPU-hours lost and victims per slot gained, then node order (so no choice depends on
  gangs' names). Each victim passes the caller's :class:`Ledger` first (Volcano's queue rules
  over the set taken so far); one refused stays refused for the walk — the rules only tighten
  as victims go — and that node's next step is worked out again (a walk that fails so is
  tried again without the victims that used the queue's room up: :data:`RETRIES`). A victim
  is a whole gang — the Job's ``PodEvicted → RestartJob`` policy takes all its pods — so its
  other nodes gain room too.
  When the plan found evicts a higher priority than another domain's bound, up to
  :data:`MORE_DOMAINS` more are walked and the best plan kept.
* **Pruned**: victims the gang turned out not to need (another's pods freed their room) are
  given back, last taken first.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gangway.scheduling.capacity import ClusterView, Ints
from gangway.scheduling.snapshot.cluster_state import Gang

__all__ = ["Found", "Ledger", "VictimTable", "search", "victim_table"]

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
LOWEST = -(2**62)
"""Below every priority: the rank of evicting no one."""
Key = tuple[int, float, float, float, int]
"""A step's rank: highest priority evicted, then unknown losses, GPU-hours lost and victims
per slot gained, then node."""


class Ledger(Protocol):
    """The queue rules a victim must pass as victims are taken (and given back)."""

    def admits(self, gang: Gang) -> bool: ...

    def take(self, gang: Gang, sign: int = 1) -> None: ...


@dataclass(frozen=True)
class VictimTable:
    """A cluster's running gangs as eviction candidates (see the module docstring)."""

    gangs: list[Gang]
    """In victim order: a gang's index is its rank."""
    queue: Ints
    """Each gang's queue, as an index of :attr:`queues`."""
    queues: dict[str, int]
    priority: Ints
    lost: Floats
    """GPU-hours lost by evicting it; NaN where unknown."""
    gpus: Ints
    """GPUs per pod."""
    gpu_type: Ints
    """Its GPU model as the view's code."""
    cpu: Ints
    """Cores per pod (millicores)."""
    node: Ints
    """Per (gang, node) row: the node, rows sorted by node then gang rank."""
    gang: Ints
    amount: Ints
    """(rows, 3): what the gang holds on the node (CPU, memory, GPUs)."""
    by_node: ByNode
    """Per node: its rows as (gang, CPU, memory, GPUs), in victim order."""
    priorities: list[int]
    """:attr:`priority` as a list (read one at a time)."""
    rank: Ranks
    """Gang key → its index."""


class ByNode:
    """A table's rows node by node, each node's as (gang, CPU, memory, GPUs) in victim order
    (worked out for a node when first read: a search reads few)."""

    def __init__(self, nodes: int, node: Ints, gang: Ints, amount: Ints) -> None:
        self.nodes, self.node, self.gang, self.amount = nodes, node, gang, amount
        self.starts = np.searchsorted(node, np.arange(nodes + 1)).tolist()
        self.done: dict[int, list[tuple[int, int, int, int]]] = {}

    def __len__(self) -> int:
        return self.nodes

    def __getitem__(self, n: int) -> list[tuple[int, int, int, int]]:
        hit = self.done.get(n)
        if hit is None:
            a, b = self.starts[n], self.starts[n + 1]
            hit = self.done[n] = [
                (g, c, m, x)
                for g, (c, m, x) in zip(
                    self.gang[a:b].tolist(), self.amount[a:b].tolist(), strict=True
                )
            ]
        return hit


class Ranks:
    """Gang key → its rank in a table, looked up when asked (:attr:`VictimTable.rank`)."""

    def __init__(self, keys: Sequence[str], rank: Ints) -> None:
        self.keys, self.ranks = keys, rank
        """``keys`` sorted; ``rank``: each one's."""

    def __getitem__(self, key: str) -> int:
        i = bisect.bisect_left(self.keys, key)
        if i == len(self.keys) or self.keys[i] != key:
            raise KeyError(key)
        return int(self.ranks[i])

    def get(self, key: str) -> int | None:
        try:
            return self[key]
        except KeyError:
            return None

    def items(self) -> list[tuple[str, int]]:
        return sorted(zip(self.keys, map(int, self.ranks), strict=True), key=lambda kv: kv[1])


def victim_table(
    view: ClusterView, now: datetime, cost: Callable[[Gang, datetime], float | None]
) -> VictimTable:
    """The table of ``view``'s running gangs at ``now`` (``cost``: what evicting one loses),
    built afresh (:func:`kept_table` keeps it instead, for the cost
    :func:`~gangway.scheduling.preemption.lost_gpu_hours` reads)."""
    ranked = []
    for by_priority in view.running.values():
        for running in by_priority.values():
            for g in running.values():
                if g.placement:
                    lost = cost(g, now)
                    ranked.append((g.priority, lost is None, lost or 0.0, g.key, g))
    ranked.sort(key=lambda r: r[:4])
    gangs = [r[4] for r in ranked]
    index = view.index
    node_of: list[int] = []
    gang_of: list[int] = []
    pods: list[int] = []
    shape: list[tuple[int, int, int]] = []
    for i, g in enumerate(gangs):
        p = g.per_pod
        shape.append((p.cpu, p.memory, p.gpus))
        for name, k in g.placement.items():
            row = index.get(name)
            if row is not None:
                node_of.append(row)
                gang_of.append(i)
                pods.append(k)
    node = np.array(node_of, dtype=np.int64)
    gang = np.array(gang_of, dtype=np.int64)
    per_pod = np.array(shape, dtype=np.int64).reshape(-1, 3)
    amount = np.array(pods, dtype=np.int64)[:, None] * per_pod[gang]
    order = np.lexsort((gang, node))
    node, gang, amount = node[order], gang[order], amount[order]
    queues: dict[str, int] = {}
    for g in gangs:
        queues.setdefault(g.queue, len(queues))
    keys = sorted(g.key for g in gangs)
    rank = {g.key: i for i, g in enumerate(gangs)}
    priority = np.array([g.priority for g in gangs], dtype=np.int64)
    return VictimTable(
        gangs=gangs,
        queue=np.array([queues[g.queue] for g in gangs], dtype=np.int64),
        queues=queues,
        priority=priority,
        lost=np.array([np.nan if r[1] else r[2] for r in ranked], dtype=np.float64),
        gpus=per_pod[:, 2].copy(),
        gpu_type=np.array([view.types.get(g.gpu_type, -1) for g in gangs], dtype=np.int64),
        cpu=per_pod[:, 0].copy(),
        node=node,
        gang=gang,
        amount=amount,
        by_node=ByNode(len(view.nodes), node, gang, amount),
        priorities=priority.tolist(),
        rank=Ranks(keys, np.array([rank[k] for k in keys], dtype=np.int64)),
    )


@dataclass(frozen=True)
class Found:
    """The victims taken (in the order taken) and the nodes' free capacity without them."""

    victims: list[Gang]
    free: Ints


def _slots(room: Ints, want: Sequence[int]) -> Ints:
    """Pods of ``want`` (CPU, memory, GPUs per pod) each row of ``room`` holds."""
    out: Ints | None = None
    for col, x in enumerate(want):
        if x > 0:
            c = room[:, col] // x
            out = c if out is None else np.minimum(out, c)
    return out if out is not None else np.zeros(len(room), dtype=np.int64)


def _slot(room: Sequence[int], want: Sequence[int]) -> int:
    return min((r // x for r, x in zip(room, want, strict=True) if x > 0), default=0)


def _runs(keys: Ints) -> tuple[Ints, Ints]:
    """For sorted ``keys``: where each run of equal keys begins, and each one's run."""
    head = np.ones(len(keys), dtype=bool)
    head[1:] = keys[1:] != keys[:-1]
    return np.flatnonzero(head), np.cumsum(head) - 1


@dataclass
class _Rows:
    """The allowed victims' rows on the nodes the gang could use, in each node's order, with
    what every prefix of a node's victims would free (see the module docstring)."""

    node: Ints
    gang: Ints
    seg: Ints
    """Each row's node run."""
    starts: Ints
    slots: Ints
    """The node's pod slots with this row's victim and those before it gone."""
    top: Ints
    """The highest priority among them."""

    @classmethod
    def empty(cls) -> _Rows:
        none, floats = np.zeros(0, dtype=np.int64), np.zeros(0)
        return cls(none, none, none, none, none, none, floats, floats)

    @property
    def ends(self) -> Ints:
        """Each node's last row."""
        out: Ints = np.append(self.starts[1:], len(self.node)) - 1
        return out

    def count(self, at: Ints) -> Ints:
        """How many victims the prefixes ending at rows ``at`` hold."""
        out: Ints = at - self.starts[self.seg[at]] + 1
        return out

    lost: Floats
    """GPU-hours each row's victim loses (0 where unknown)."""
    unknown: Floats
    """1 where that loss is unknown, else 0."""

    def prefix(self, x: Floats, at: Ints) -> Floats:
        """The sums of ``x`` (per row) over the prefixes ending at rows ``at``."""
        c = np.cumsum(x)
        first = self.starts[self.seg[at]]
        out: Floats = c[at] - c[first] + x[first]
        return out


def _rows(w: _Walk) -> _Rows | None:
    """The allowed victims' rows on the usable nodes (None: there are none)."""
    t = w.table
    rows = np.flatnonzero(w.allowed[t.gang] & w.usable[t.node])
    if not len(rows):
        return None
    frees = w.useful[t.gang[rows]]
    if not frees.all():  # on each node, the victims that free what the gang lacks first
        rows = rows[np.lexsort((rows, ~frees, t.node[rows]))]
    node, gang = t.node[rows], t.gang[rows]
    starts, seg = _runs(node)
    amount = t.amount[rows]
    c = np.cumsum(amount, axis=0)
    room = w.view.free[node] + c - (c[starts] - amount[starts])[seg]
    slots = _slots(np.minimum(room, w.view.allocatable[node]), w.want)
    prio = t.priority[gang]
    low = int(prio.min())
    span = int(prio.max()) - low + 1
    top = np.maximum.accumulate(seg * span + (prio - low)) - seg * span + low
    lost = t.lost[gang]
    unknown = np.isnan(lost)
    return _Rows(
        node=node,
        gang=gang,
        seg=seg,
        starts=starts,
        slots=slots,
        top=top,
        lost=np.where(unknown, 0.0, lost),
        unknown=unknown.astype(np.float64),
    )


def _domains(w: _Walk, r: _Rows, counts: Ints, doms: Ints, n_doms: int) -> list[tuple[int, int]]:
    """The domains that could hold the gang with every allowed victim gone, each with the
    lowest priority any plan there must evict (a bound: each node's first step's priority,
    its whole room counted), most promising first — by that bound, then by the GPU-hours and
    the victims that evicting whole nodes (lowest priority, then least lost per slot, first)
    would take."""
    if not len(r.node):  # no victim frees room: only domains with room already (quota plans)
        cap_now = np.bincount(doms, weights=counts, minlength=n_doms)
        return [(int(d), LOWEST) for d in np.flatnonzero(cap_now >= w.pods)]
    ends = r.ends
    most = counts.copy()
    most[r.node[ends]] = r.slots[ends]
    cap_most = np.bincount(doms, weights=most, minlength=n_doms)
    if n_doms == 1:
        return [(0, LOWEST)] if cap_most[0] >= w.pods else []
    if not (cap_most >= w.pods).any():
        return []
    cap_now = np.bincount(doms, weights=counts, minlength=n_doms)
    ready = [(int(d), LOWEST) for d in np.flatnonzero(cap_now >= w.pods)]  # room: quota only
    gain = r.slots[ends] - counts[r.node[ends]]
    idx = np.flatnonzero(r.slots > counts[r.node])
    first = idx[_runs(r.seg[idx])[0]]  # each node's first step (nodes in run order)
    ends = ends[gain > 0]
    g, c, p = gain[gain > 0], r.count(ends), r.top[first]
    lost = r.prefix(r.lost, ends)
    d = doms[r.node[ends]]
    o = np.lexsort((c / g, lost / g, p, d))
    d, g, c, p, lost = d[o], g[o], c[o], p[o], lost[o]
    starts, seg = _runs(d)
    cg, cc, cl = np.cumsum(g), np.cumsum(c), np.cumsum(lost)
    reach = np.flatnonzero(cg - (cg[starts] - g[starts])[seg] >= w.pods - cap_now[d])
    if not len(reach):
        return ready
    at = reach[_runs(d[reach])[0]]
    victims = (cc - (cc[starts] - c[starts])[seg])[at]
    cost = (cl - (cl[starts] - lost[starts])[seg])[at]
    ranked = np.lexsort((d[at], victims, cost, p[at]))
    return ready + [
        (int(x), int(bound))
        for x, bound in zip(d[at][ranked], p[at][ranked], strict=True)
        if cap_now[x] < w.pods
    ]


MORE_DOMAINS = 8
"""After a plan is found, how many more domains whose bound says they might evict lower
priorities are walked, found or not (their plans compared, the best kept)."""


def _rank(found: Found, table: VictimTable) -> tuple[int, int, float, int]:
    """A plan's rank: the highest priority it evicts, how many of its victims' losses are
    unknown, the GPU-hours the others lose, its victims."""
    lost = [float(table.lost[table.rank[g.key]]) for g in found.victims]
    top = max((g.priority for g in found.victims), default=LOWEST)
    known = [x for x in lost if not math.isnan(x)]
    return top, len(lost) - len(known), sum(known), len(found.victims)


def search(
    view: ClusterView,
    table: VictimTable,
    *,
    want: tuple[int, int, int],
    pods: int,
    usable: Bools,
    counts: Ints,
    allowed: Bools,
    useful: Bools,
    tier: int | None,
    ledger: Ledger,
    enough: Callable[[], bool] | None = None,
    relieves: Callable[[Gang], bool] | None = None,
) -> Found | None:
    """The victims that let ``pods`` pods of ``want`` fit in one domain at ``tier`` (None: the
    cluster) — see the module docstring — or None. ``counts``: each node's slots now (0 where
    not ``usable``); ``allowed``/``useful``: per gang of ``table``. With ``enough`` (the gang's
    queue within its capability once the victims are gone), victims that ``relieves`` says
    lower that queue's use are taken after the room is made, in victim order, until it is."""
    if tier is None:
        doms, n_doms = np.zeros(len(view.nodes), dtype=np.int64), 1
    else:
        doms, n_doms = view.domains[tier].astype(np.int64), len(view.domain_names[tier])
    banned = np.zeros(len(allowed), dtype=bool)
    for _ in range(1 + RETRIES):
        walk = _Walk(
            view, table, want, pods, allowed & ~banned, useful, usable, ledger, enough, relieves
        )
        r = _rows(walk)
        if r is None and enough is None:
            return None
        if r is None:  # room already somewhere: only victims that relieve the quota may help
            r = _Rows.empty()
        best = _best(walk, r, counts, doms, n_doms)
        if best is not None or not walk.blockers:
            return best
        banned[sorted(walk.blockers)] = True  # walk again without those that used the excess up
    return None


def _best(walk: _Walk, r: _Rows, counts: Ints, doms: Ints, n_doms: int) -> Found | None:
    """The best plan over the domains (see :data:`MORE_DOMAINS`), the ledger holding it."""
    best: tuple[tuple[int, int, float, int], Found] | None = None
    more = MORE_DOMAINS
    for d, bound in _domains(walk, r, counts, doms, n_doms):
        if best is not None and (bound >= best[0][0] or more <= 0):
            break
        found = walk.within(doms == d, r, counts)
        if found is None:
            if best is not None:
                more -= 1  # every walk after the first plan counts, found or not
            continue
        for g in found.victims:  # the ledger holds no plan between domains
            walk.ledger.take(g, -1)
        rank = _rank(found, walk.table)
        if best is not None:
            more -= 1  # every walk after the first plan counts, found or not
        if best is None or rank < best[0]:
            best = (rank, found)
    if best is None:
        return None
    for g in best[1].victims:
        walk.ledger.take(g)
    return best[1]


RETRIES = 2
"""When no plan is found and a victim was refused because victims of its queue taken before
it used up that queue's excess (or its guarantee), the walk is tried again without those
(at most this many times): the lowest-priority step first is greedy, and can take the one
victim whose loss forbids the useful one."""


@dataclass
class _Walk:
    """One search: the table, the gang's shape, what may go, and the queue rules."""

    view: ClusterView
    table: VictimTable
    want: tuple[int, int, int]
    pods: int
    allowed: Bools
    """Per gang: may be evicted for this one (the caller's rules)."""
    useful: Bools
    """Per gang: frees what this one is short of (its GPU model, or CPU)."""
    usable: Bools
    """Per node: a pod of the gang could run there at all."""
    ledger: Ledger
    enough: Callable[[], bool] | None = None
    """The gang's queue within its capability once the victims are gone (None: it is now)."""
    relieves: Callable[[Gang], bool] | None = None
    """A victim lowers that queue's use."""
    blockers: set[int] = field(default_factory=set)
    """Victims taken before one of their queue's was refused (see :data:`RETRIES`)."""

    def offer(
        self, n: int, free: Ints, slots: Ints, skip: set[int], short: int
    ) -> tuple[Key, list[int]] | None:
        """Node ``n``'s next step over ``free``: the shortest prefix of its victims not in
        ``skip`` (taken or refused) that gives it one more slot, and its rank."""
        room = free[n].tolist()
        cap = self.view.allocatable[n].tolist()
        s0 = int(slots[n])
        t = self.table
        picked: list[int] = []
        top, unknown, lost = LOWEST, 0, 0.0
        for first in (True, False):  # what the gang is short of first
            for g, c, m, x in t.by_node[n]:
                if g in skip or bool(self.useful[g]) != first or not self.allowed[g]:
                    continue
                room = [
                    min(room[0] + c, cap[0]),
                    min(room[1] + m, cap[1]),
                    min(room[2] + x, cap[2]),
                ]
                picked.append(g)
                top = max(top, t.priorities[g])
                if math.isnan(t.lost[g]):
                    unknown += 1
                else:
                    lost += float(t.lost[g])
                gain = _slot(room, self.want) - s0
                if gain > 0:
                    per = float(max(min(gain, short), 1))
                    return (top, unknown / per, lost / per, len(picked) / per, n), picked
        return None

    def evict(self, g: int, free: Ints) -> Ints:
        """Give what gang ``g`` holds (every pod of it) back onto ``free``; its nodes."""
        rows, held = self.view.rows(self.table.gangs[g])
        free[rows] = np.minimum(free[rows] + held, self.view.allocatable[rows])
        return rows

    def recount(self, rows: Ints, free: Ints, slots: Ints, in_dom: Bools) -> int:
        """Recount ``slots`` on ``rows`` from ``free``; the change inside the domain."""
        new = np.where(self.usable[rows], _slots(free[rows], self.want), 0)
        delta = int((new - slots[rows])[in_dom[rows]].sum())
        slots[rows] = new
        return delta

    def first_steps(
        self, in_dom: Bools, r: _Rows, counts: Ints, short: int
    ) -> tuple[list[int], tuple[Ints, Floats, Floats, Floats]]:
        """Each domain node's first step (the row ending it), cheapest first, and the ranks'
        columns in that order (see :data:`Key`)."""
        idx = np.flatnonzero((r.slots > counts[r.node]) & in_dom[r.node])
        first = idx[_runs(r.seg[idx])[0]] if len(idx) else idx
        per = np.maximum(np.minimum(r.slots[first] - counts[r.node[first]], short), 1)
        ratio = r.count(first) / per
        unknown = r.prefix(r.unknown, first) / per
        lost = r.prefix(r.lost, first) / per
        order = np.lexsort((r.node[first], ratio, lost, unknown, r.top[first]))
        keys = (r.top[first][order], unknown[order], lost[order], ratio[order])
        return first[order].tolist(), keys

    def within(self, in_dom: Bools, r: _Rows, counts: Ints) -> Found | None:
        """The walk inside one domain (``in_dom``: its nodes); see the module docstring."""
        view, t, pods, enough = self.view, self.table, self.pods, self.enough
        free = view.free.copy()
        slots = counts.copy()
        total = int(counts[in_dom].sum())
        stream, keys = self.first_steps(in_dom, r, counts, pods - total)
        version: dict[int, int] = {}
        heap: list[tuple[Key, int, list[int]]] = []
        taken: list[int] = []
        skip: set[int] = set()
        p = 0
        while total < pods:
            while p < len(stream) and version.get(int(r.node[stream[p]]), 0):
                p += 1  # that node changed since: its step is on the heap, worked out again
            while heap and heap[0][1] != version.get(heap[0][0][4], 0):
                heapq.heappop(heap)
            head: Key | None = None
            if p < len(stream):
                i = stream[p]
                head = (
                    int(keys[0][p]),
                    float(keys[1][p]),
                    float(keys[2][p]),
                    float(keys[3][p]),
                    int(r.node[i]),
                )
            if heap and (head is None or heap[0][0] < head):
                key, _, picked = heapq.heappop(heap)
                n = key[4]
            elif head is not None:
                n = head[4]
                picked = r.gang[r.starts[r.seg[i]] : i + 1].tolist()
                p += 1
            else:
                break
            touched = {n}
            for g in picked:
                if g in skip:
                    continue
                if not self.ledger.admits(t.gangs[g]):
                    skip.add(g)  # refused for this walk: the rules only tighten as it takes more
                    self.blockers.update(x for x in taken if t.queue[x] == t.queue[g])
                    touched.update(view.rows(t.gangs[g])[0].tolist())  # its other nodes' steps
                    break
                self.ledger.take(t.gangs[g])
                skip.add(g)
                taken.append(g)
                rows = self.evict(g, free)
                total += self.recount(rows, free, slots, in_dom)
                touched.update(rows.tolist())
            for m in touched:
                if in_dom[m] and self.usable[m]:
                    v = version[m] = version.get(m, 0) + 1
                    step = self.offer(m, free, slots, skip, pods - total)
                    if step is not None:
                        heapq.heappush(heap, (step[0], v, step[1]))
        if total >= pods and enough is not None and self.relieves is not None:
            total += self.relieve(enough, self.relieves, skip, taken, free, slots, in_dom)
        if total < pods or (enough is not None and not enough()):
            for g in taken:
                self.ledger.take(t.gangs[g], -1)
            return None
        return Found(self.prune(taken, free, slots, total, in_dom), free)

    def relieve(
        self,
        enough: Callable[[], bool],
        relieves: Callable[[Gang], bool],
        skip: set[int],
        taken: list[int],
        free: Ints,
        slots: Ints,
        in_dom: Bools,
    ) -> int:
        """Once the room is made: victims ``relieves`` says lower the over-capability queue's
        use, in victim order, until ``enough``; the slots they add inside the domain."""
        t, added = self.table, 0
        for g in np.flatnonzero(self.allowed).tolist():
            if enough():
                break
            gang = t.gangs[g]
            if g in skip or not relieves(gang) or not self.ledger.admits(gang):
                continue
            self.ledger.take(gang)
            skip.add(g)
            taken.append(g)
            added += self.recount(self.evict(g, free), free, slots, in_dom)
        return added

    def prune(
        self,
        taken: list[int],
        free: Ints,
        slots: Ints,
        total: int,
        in_dom: Bools,
    ) -> list[Gang]:
        """``taken`` less the victims the gang does not need, last taken first (``free`` and
        the ledger follow)."""
        view, t = self.view, self.table
        for g in reversed(list(taken)):
            if len(taken) == 1:
                break
            gang = t.gangs[g]
            rows, held = view.rows(gang)
            kept = free[rows].copy()
            free[rows] = np.maximum(kept - held, view.free[rows])
            before = slots[rows].copy()
            delta = self.recount(rows, free, slots, in_dom)
            self.ledger.take(gang, -1)
            if total + delta >= self.pods and (self.enough is None or self.enough()):
                taken.remove(g)
                total += delta
                continue
            self.ledger.take(gang)
            free[rows], slots[rows] = kept, before
        return [t.gangs[g] for g in taken]
