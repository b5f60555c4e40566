"""Benchmark: the fleet twin (``-m benchmark``).

* **scale**: a month of generated gangs (offered load 2.0 — what gives the 1,200-node month
  its ≥ 100k gangs (105,232) — seed 42) replayed through the platform's own decisions on the
  example twin fleet scaled to 300, 600 and 1,200 nodes (GPUs and the teams' GPU quotas × nodes
  / 144), one core; writes the wall-clock, events and decisions to
  ``bench-results/fleet-twin/scale.md``. Goal: the 1,200-node month in ≤ 5 min — **not met**
  (docs/capacity.md, "Scale": at load 2.0 the backlog grows all month and every finish asks
  it again; with the refusals remembered the 300-node month takes 120 s, the 1,200-node one
  did not finish in 15 min), so that size is an expected failure until it is.
* **what-if**: a month on the example fleet (144 nodes) with the twin, both baselines and three
  what-ifs, written to ``bench-results/fleet-twin/what-if/`` (the table and plot in
  docs/capacity.md). The same from the command line:

      gangway simulate --fleet example --workload generate --hours 720 \\
          --what-if add-nodes=eu-west:H100:16 --what-if deserved=team-a:-10%,team-b:+10% \\
          --what-if checkpoint-every=4h --out DIR
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from gangway.scheduling.simulation.twin import TwinSettings, replay_twin
from gangway.scheduling.simulation.twin_fleet import EXAMPLE_TWIN_FLEET, twin_fleet
from gangway.scheduling.simulation.twin_report import queue_rows, write_twin_outputs
from gangway.scheduling.simulation.twin_workload import generate_twin
from gangway.scheduling.simulation.what_if import parse_what_if, replays

pytestmark = pytest.mark.benchmark
RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "fleet-twin"
MONTH_H = 30 * 24
EXAMPLE_NODES = 144
SCALE_LOAD = 2.0
"""The offered load that gives the 1,200-node month ≥ 100k gangs."""


def scaled_config(nodes: int, path: Path) -> Path:
    """The example twin fleet's config with its GPUs and GPU quotas × ``nodes`` / 144."""
    cfg = yaml.safe_load(EXAMPLE_TWIN_FLEET.read_text())
    k = nodes / EXAMPLE_NODES

    def scale(gpus: dict[str, int]) -> dict[str, int]:
        return {m: max(8, round(v * k / 8) * 8) for m, v in gpus.items()}

    for c in cfg["clusters"].values():
        c["gpus"] = scale(c["gpus"])
    for t in cfg["teams"].values():
        for q in ("guarantee", "deserved", "capability"):
            if "gpu" in t.get(q, {}):
                t[q]["gpu"] = scale(t[q]["gpu"])
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("nodes", [300, 600, 1200])
def test_a_month_at_scale(nodes: int, tmp_path: Path) -> None:
    fleet = twin_fleet(str(scaled_config(nodes, tmp_path / "fleet.yaml")))
    gangs = generate_twin(fleet, load=SCALE_LOAD, hours=MONTH_H, seed=42)
    if nodes == 1200:
        assert len(gangs) >= 100_000
        pytest.xfail("the 1,200-node month is not within the 5-minute goal yet (docs/capacity.md)")
    started = time.perf_counter()
    run = replay_twin(fleet, gangs, TwinSettings(horizon_s=MONTH_H * 3600))
    seconds = time.perf_counter() - started
    row = queue_rows(run)[-1]
    line = (
        f"| {nodes} | {len(gangs):,} | {run.events:,} | {run.decisions:,} | "
        f"{1000 * run.decision_s / max(run.decisions, 1):.2f} | {seconds:.0f} | "
        f"{row.share:.1f} | {row.preemptions:,} |"
    )
    print(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / "scale.md").open("a") as f:
        f.write(line + "\n")
    assert row.share > 80  # twice the fleet's GPUs offered: it stays busy (a percentage)


def test_what_ifs_side_by_side_for_a_month() -> None:
    fleet = twin_fleet("example")
    gangs = generate_twin(fleet, load=1.0, hours=MONTH_H, seed=42)
    changes = [
        parse_what_if(w, fleet)
        for w in (
            "add-nodes=eu-west:H100:16",
            "deserved=team-a:-10%,team-b:+10%",
            "checkpoint-every=4h",
        )
    ]
    base = TwinSettings(horizon_s=MONTH_H * 3600)
    runs = [replay_twin(f, g, s) for f, g, s in replays(fleet, gangs, base, changes)]
    about = [fleet.describe(), f"generated, offered load 1.0, seed 42, {MONTH_H} h"]
    write_twin_outputs(
        RESULTS / "what-if", runs, title="Fleet twin: example fleet, a month", about=about,
        with_plot=True,
    )  # fmt: skip
    heads = {r.name: queue_rows(r)[-1] for r in runs}
    assert heads["no preemption"].preemptions == 0
    assert heads["checkpoint-every=4h"].lost_gpu_hours > heads["twin"].lost_gpu_hours
