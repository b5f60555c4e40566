"""The kept candidate table (:mod:`gangway.scheduling.candidates`) against the one built afresh
(:func:`gangway.scheduling.preemption.rebuilt_table`), value for value, at every decision of a
replay through preemption and reclaim; and the replay's results against those recorded before
the table was kept."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from gangway.scheduling.candidates import to_hundredths
from gangway.scheduling.capacity import SnapshotView
from gangway.scheduling.preemption import _table, rebuilt_table
from gangway.scheduling.simulation.twin import (
    Choice,
    TwinRun,
    TwinSettings,
    platform_decision,
    replay_twin,
)
from gangway.scheduling.simulation.twin_fleet import twin_fleet
from gangway.scheduling.simulation.twin_workload import generate_twin
from gangway.scheduling.workload import Workload

BEFORE = "afaa9ce017b8c0845c043e12ea40e9d173e703dbf0c233a83a5c18fe77f30295"
"""The example fleet, a week at offered load 2.0, seed 42, replayed with the table rebuilt
after every start and finish (the code before the table was kept)."""


def digest(run: TwinRun) -> str:
    rows = [
        (o.gang.name, o.first_start_s, o.end_s, o.cluster, o.preemptions,
         round(o.lost_gpu_hours, 9), o.never_fits)
        for o in run.outcomes
    ]  # fmt: skip
    blob = json.dumps([rows, run.times, run.held, run.decisions, run.events])
    return hashlib.sha256(blob.encode()).hexdigest()


def same_tables(fleet: SnapshotView) -> None:
    now = fleet.snapshot.taken_at
    for view in fleet.clusters.values():
        kept, built = _table(view, now), rebuilt_table(view, now)
        a, b = kept.table, built.table
        assert [g.key for g in a.gangs] == [g.key for g in b.gangs]
        assert a.queues == b.queues and a.priorities == b.priorities
        for col in ("queue", "priority", "gpus", "gpu_type", "cpu", "node", "gang", "amount"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), col
        assert np.array_equal(a.lost, b.lost, equal_nan=True)
        assert np.array_equal(kept.reclaimable, built.reclaimable)
        assert a.rank.items() == b.rank.items()
        for n in {0, len(view.nodes) // 2, len(view.nodes) - 1}:
            assert a.by_node[n] == b.by_node[n]


def test_the_kept_table_is_the_rebuilt_one_at_every_decision() -> None:
    fleet = twin_fleet("example")
    gangs = generate_twin(fleet, load=2.0, hours=48, seed=7)
    checked = 0

    def decide(w: Workload, view: SnapshotView) -> Choice:
        nonlocal checked
        if checked < 400:
            same_tables(view)
            checked += 1
        return platform_decision(w, view)

    run = replay_twin(fleet, gangs, TwinSettings(horizon_s=48 * 3600, decide=decide))
    assert checked == 400 and sum(o.preemptions for o in run.outcomes) > 0


def test_a_week_replays_as_before_the_table_was_kept() -> None:
    fleet = twin_fleet("example")
    gangs = generate_twin(fleet, load=2.0, hours=168, seed=42)
    assert digest(replay_twin(fleet, gangs, TwinSettings(horizon_s=168 * 3600))) == BEFORE


def test_hundredths_round_as_python_does() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.random(20000) * 1000, np.arange(20000) / 200, [2.675, 1.005, 0.0]])
    assert to_hundredths(x).tolist() == [round(v, 2) for v in x.tolist()]


def test_the_remembered_refusals_decide_as_asking_again() -> None:
    """The replay's memo of refused shapes (``TwinSettings.memo``) against asking the decision
    every time: the same starts, evictions, waits and counts, over four loaded days."""
    fleet = twin_fleet("example")
    gangs = generate_twin(fleet, load=2.0, hours=96, seed=11)
    runs = [
        replay_twin(fleet, gangs, TwinSettings(horizon_s=96 * 3600, memo=memo))
        for memo in (True, False)
    ]
    assert digest(runs[0]) == digest(runs[1])
    assert sum(o.preemptions for o in runs[0].outcomes) > 0
