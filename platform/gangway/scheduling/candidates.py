"""A cluster's running gangs as eviction candidates, kept current as gangs start and stop:
:func:`kept_table` is :func:`gangway.scheduling.victims.victim_table` with the cost
:func:`gangway.scheduling.preemption.lost_gpu_hours` reads, without the rebuild.

The table used to be built afresh — a Python loop over every running gang and its nodes —
after each start or finish; a replay of a month decides after every one. Here the columns that
do not depend on the time are kept (:class:`Candidates`, a
:class:`~gangway.scheduling.capacity.Watcher` of the view), a gang's added on
:meth:`~gangway.scheduling.capacity.ClusterView.hold` and dropped on
:meth:`~gangway.scheduling.capacity.ClusterView.release`, in the order of the gangs' keys; the
one that does — what evicting a gang loses, its GPUs × the hours since its last checkpoint (or
its start), to the hundredth — is a function of ``now`` worked out in arrays, and the victim
order (priority, unknown loss last, loss, key) one stable sort of them. The table it gives is
the rebuilt one, value for value (``tests/unit/scheduling/test_candidates.py`` checks both
along a replay).
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from gangway.scheduling.capacity import ClusterView, Ints
from gangway.scheduling.snapshot.cluster_state import Gang
from gangway.scheduling.victims import ByNode, Ranks, VictimTable

__all__ = ["Candidates", "kept_table", "to_hundredths"]

Floats = npt.NDArray[np.float64]
MICRO = timedelta(microseconds=1)
_INT_COLUMNS = ("priority", "since", "queue", "kind", "gpus", "gpu_type", "cpu", "ids")


def to_hundredths(x: Floats) -> Floats:
    """``round(v, 2)`` of each value as Python rounds it (correctly, from the exact binary
    value): numpy's scale-and-round where no half-way case is near, Python's own where one
    is."""
    out: Floats = np.round(x, 2)
    scaled = x * 100
    near = np.flatnonzero(np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    if len(near):
        out[near] = [round(v, 2) for v in x[near].tolist()]
    return out


class Candidates:
    """The time-independent columns of a view's running gangs (see the module docstring),
    positions in the order of the gangs' keys; rows (gang, node) by a gang id that stays
    while it runs."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.keys: list[str] = []
        self.gangs: list[Gang] = []
        self.cols: dict[str, Ints] = {c: np.zeros(0, dtype=np.int64) for c in _INT_COLUMNS}
        self.rate = np.zeros(0, dtype=np.float64)
        """GPUs of the whole gang."""
        self.known = np.zeros(0, dtype=bool)
        """Whether its last checkpoint or start is known."""
        self.ref: datetime | None = None
        """``since`` counts microseconds from this."""
        self.queue_names: list[str] = []
        self.queue_codes: dict[str, int] = {}
        self.kinds: dict[tuple[str, str | None, bool, bool, bool], int] = {}
        self.example: dict[int, Gang] = {}
        """A gang of each kind."""
        self.free_ids: list[int] = []
        self.next_id = 0
        self.row_node = np.zeros(0, dtype=np.int64)
        self.row_id = np.zeros(0, dtype=np.int64)
        self.row_amount = np.zeros((0, 3), dtype=np.int64)
        self.row_live = np.zeros(0, dtype=bool)
        for by_priority in view.running.values():
            for running in by_priority.values():
                for g in running.values():
                    self.started(g)

    def started(self, gang: Gang) -> None:
        if not gang.placement:
            return  # holds no node: never a candidate
        since = gang.last_checkpoint_at or gang.started_at
        if since is not None and self.ref is None:
            self.ref = since
        sid = self.free_ids.pop() if self.free_ids else self.next_id
        self.next_id = max(self.next_id, sid + 1)
        p = gang.per_pod
        kind = (gang.queue, gang.gpu_type, bool(p.gpus), bool(p.cpu), bool(p.memory))
        values = {
            "priority": gang.priority,
            "since": 0 if since is None or self.ref is None else (since - self.ref) // MICRO,
            "queue": self.queue_codes.setdefault(gang.queue, len(self.queue_codes)),
            "kind": self.kinds.setdefault(kind, len(self.kinds)),
            "gpus": p.gpus,
            "gpu_type": self.view.types.get(gang.gpu_type, -1),
            "cpu": p.cpu,
            "ids": sid,
        }
        self.example.setdefault(values["kind"], gang)
        if len(self.queue_names) < len(self.queue_codes):
            self.queue_names.append(gang.queue)
        at = bisect.bisect_left(self.keys, gang.key)
        self.keys.insert(at, gang.key)
        self.gangs.insert(at, gang)
        for c, v in values.items():
            self.cols[c] = np.insert(self.cols[c], at, v)
        self.rate = np.insert(self.rate, at, float(p.gpus * gang.pods))
        self.known = np.insert(self.known, at, since is not None)
        rows, amounts = self.view.rows(gang)
        self.row_node = np.concatenate([self.row_node, rows])
        self.row_id = np.concatenate([self.row_id, np.full(len(rows), sid, dtype=np.int64)])
        self.row_amount = np.concatenate([self.row_amount, amounts])
        self.row_live = np.concatenate([self.row_live, np.ones(len(rows), dtype=bool)])

    def stopped(self, gang: Gang) -> None:
        at = bisect.bisect_left(self.keys, gang.key)
        if at == len(self.keys) or self.keys[at] != gang.key:
            return
        sid = int(self.cols["ids"][at])
        del self.keys[at], self.gangs[at]
        for c in _INT_COLUMNS:
            self.cols[c] = np.delete(self.cols[c], at)
        self.rate = np.delete(self.rate, at)
        self.known = np.delete(self.known, at)
        self.row_live[self.row_id == sid] = False
        self.free_ids.append(sid)
        if 2 * int(self.row_live.sum()) < len(self.row_live):  # compact the dead rows
            live = self.row_live
            self.row_node, self.row_id = self.row_node[live], self.row_id[live]
            self.row_amount, self.row_live = self.row_amount[live], self.row_live[live]

    def lost(self, now: datetime) -> Floats:
        """What evicting each gang loses at ``now`` (NaN where unknown), as
        :func:`~gangway.scheduling.preemption.lost_gpu_hours` works it out."""
        at = 0 if self.ref is None else (now - self.ref) // MICRO
        seconds = (at - self.cols["since"]) / 1e6
        hours = np.maximum(seconds, 0.0) / 3600
        out = to_hundredths(self.rate * hours)
        out[~self.known] = np.nan
        return out

    def table(self, now: datetime) -> tuple[VictimTable, Ints]:
        """The table at ``now`` (see the module docstring), and each gang's kind."""
        cols, n = self.cols, len(self.keys)
        lost = self.lost(now)
        unknown = np.isnan(lost)
        order = np.lexsort((np.where(unknown, 0.0, lost), unknown, cols["priority"]))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        pos = np.zeros(self.next_id, dtype=np.int64)
        pos[cols["ids"]] = np.arange(n)
        live = self.row_live
        node, amount = self.row_node[live], self.row_amount[live]
        gang = rank[pos[self.row_id[live]]]
        rows = np.lexsort((gang, node))
        node, gang, amount = node[rows], gang[rows], amount[rows]
        q = cols["queue"][order]
        codes, first = np.unique(q, return_index=True)
        appear = codes[np.argsort(first)]  # queues in the order they first appear
        recode = np.zeros(len(self.queue_names), dtype=np.int64)
        recode[appear] = np.arange(len(appear))
        priority = cols["priority"][order]
        gangs = self.gangs
        table = VictimTable(
            gangs=[gangs[i] for i in order.tolist()],
            queue=recode[q],
            queues={self.queue_names[c]: i for i, c in enumerate(appear.tolist())},
            priority=priority,
            lost=lost[order],
            gpus=cols["gpus"][order],
            gpu_type=cols["gpu_type"][order],
            cpu=cols["cpu"][order],
            node=node,
            gang=gang,
            amount=amount,
            by_node=ByNode(len(self.view.nodes), node, gang, amount),
            priorities=priority.tolist(),
            rank=Ranks(list(self.keys), rank),
        )
        return table, cols["kind"][order]


def kept_table(view: ClusterView, now: datetime) -> tuple[VictimTable, Ints, dict[int, Gang]]:
    """The table of ``view``'s running gangs at ``now`` (see the module docstring); each
    gang's kind as a code (its queue, GPU model and whether it asks GPUs, CPU and memory: all
    that reclaim judges it by) and a gang of each kind."""
    kept = view.watch("candidates", lambda: Candidates(view))
    assert isinstance(kept, Candidates)
    t, kind = kept.table(now)
    return t, kind, kept.example
