"""Benchmark: gangs on a topology (``-m benchmark``) — all-or-nothing jobs of N pods × G GPUs
arriving over 14 days on the example fleet (1,024 H100 in racks of 8 nodes, blocks of 4
racks), the published job-size mix (docs/simulation.md), 10 seeds at offered loads 0.9 and
1.1: the scheduler's own ``place`` against Volcano-like binpack and a random domain, in the
same run on the same arrivals. Writes ``bench-results/gang-placement/LOAD/`` (summary, CSVs,
plot). The same from the command line:

    gangway simulate --gangs generate --fleet example --load 0.9 --seeds 10 --out DIR
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gangway.scheduling.simulation.fleet import build_fleet
from gangway.scheduling.simulation.gang_report import gang_headlines, write_gang_outputs
from gangway.scheduling.simulation.gang_workload import generate
from gangway.scheduling.simulation.gangs import GANG_POLICIES, replay_gangs

pytestmark = pytest.mark.benchmark
RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "gang-placement"
SEEDS = range(42, 52)
HOURS = 14 * 24


@pytest.mark.parametrize("load", [0.9, 1.1])
def test_gangs_on_a_topology(load: float) -> None:
    fleet = build_fleet("example", None, (8, 4))
    runs = []
    for seed in SEEDS:
        jobs = generate(fleet, load=load, hours=HOURS, seed=seed)
        runs += [
            replay_gangs(fleet, jobs, p, seed=seed, horizon_s=HOURS * 3600) for p in GANG_POLICIES
        ]
    about = [fleet.describe(), f"offered load {load}, {HOURS} h, seeds {SEEDS[0]}–{SEEDS[-1]}"]
    write_gang_outputs(
        RESULTS / f"load-{load}", runs, title=f"Gangs on 1,024 H100, load {load}", about=about,
        with_plot=True,
    )  # fmt: skip
    heads = {h.policy: h for h in gang_headlines(runs)}
    for h in heads.values():
        print(h)
    assert heads["gangway"].tightest == 100.0  # the closest tier that fits, by construction
    assert (
        heads["binpack"].tightest < 100.0 and heads["random"].tightest < heads["binpack"].tightest
    )
    assert heads["random"].allocation < heads["gangway"].allocation
