"""Usage accounting as pure functions over hand-built attempts: GPU-hours, queue waits, run
time, MFU and preemptions by group over a window; the per-day series; ``--since`` and
``--by``; and the PromQL and its samples turned into the same rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gangway.errors import PermanentError
from gangway.lineage.attempts import Attempt
from gangway.lineage.usage import (
    DAY_MS,
    Used,
    Window,
    daily,
    parse_by,
    parse_since,
    prom_by,
    prom_queries,
    prom_rows,
    survived,
    usage_rows,
)

H = 3_600_000
NOW = 1_796_644_800_000  # 2026-12-07T12:00:00Z
WEEK = Window.last(7 * 86_400, NOW)


def attempt(**kw: object) -> Attempt:
    """A finished one-hour CPU attempt of team research, unless told otherwise."""
    base = Attempt(
        pipeline="train-eval-infer",
        workflow="w1",
        step="train",
        team="research",
        queue="research-q",
        device="cpu",
        devices=1,
        gpu_model="",
        status="FINISHED",
        submitted_ms=NOW - 10 * H,
        start_ms=NOW - 10 * H,
        running_ms=NOW - 10 * H,
        end_ms=NOW - 9 * H,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


S = NOW - 48 * H
USED = [
    # A 2 × 8 H100 gang preempted after an hour, then run again for two hours to the end.
    Used(
        attempt(
            device="gpu",
            devices=16,
            gpu_model="H100",
            status="KILLED",
            submitted_ms=S,
            start_ms=S + 60_000,
            running_ms=S + 120_000,
            end_ms=S + H + 60_000,
        ),
        mfu=0.30,
    ),
    Used(
        attempt(
            device="gpu",
            devices=16,
            gpu_model="H100",
            submitted_ms=S + 2 * H,
            start_ms=S + 2 * H + 30_000,
            running_ms=S + 2 * H + 90_000,
            end_ms=S + 4 * H + 30_000,
        ),
        mfu=0.40,
    ),
    # Vision: a 4-process CPU evaluation of half an hour, 10 minutes in the queue.
    Used(
        attempt(
            workflow="w2",
            step="eval",
            team="vision",
            queue="vision-q",
            devices=4,
            submitted_ms=S,
            start_ms=S + 600_000,
            running_ms=S + 600_000,
            end_ms=S + 600_000 + H // 2,
        )
    ),
    # Vision, 8 A100s across the window's start: one hour of two inside.
    Used(
        attempt(
            workflow="w3",
            team="vision",
            queue="vision-q",
            device="gpu",
            devices=8,
            gpu_model="A100",
            submitted_ms=WEEK.start_ms - H,
            start_ms=WEEK.start_ms - H,
            running_ms=WEEK.start_ms - H,
            end_ms=WEEK.start_ms + H,
        )
    ),
    # Vision, ended eight days ago: outside.
    Used(attempt(workflow="w0", team="vision", start_ms=NOW - 8 * 24 * H, end_ms=NOW - 191 * H)),
    # Research, 8 H100s still running for half an hour: up to now.
    Used(
        attempt(
            workflow="w4",
            device="gpu",
            devices=8,
            gpu_model="H100",
            status="RUNNING",
            submitted_ms=NOW - H // 2 - 30_000,
            start_ms=NOW - H // 2,
            running_ms=NOW - H // 2,
            end_ms=None,
        ),
        mfu=0.50,
    ),
]


def test_gpu_hours_waits_runtime_mfu_and_preemptions_by_team() -> None:
    research, vision = usage_rows(USED, WEEK, ("team",))
    assert research.keys == {"team": "research"}
    # 16 GPUs × (1 h + 2 h) + 8 GPUs × ½ h running
    assert research.gpu_hours == pytest.approx(52.0)
    assert research.cpu_hours == 0
    assert (research.runs, research.attempts, research.preemptions) == (2, 3, 1)
    assert research.wait_mean_s == pytest.approx((120 + 90 + 30) / 3)
    assert research.wait_max_s == pytest.approx(120)
    assert research.run_hours == pytest.approx(3.5)
    # device-seconds-weighted: 16 GPU-h at 0.30, 32 at 0.40, 4 at 0.50
    assert research.util == pytest.approx((16 * 0.30 + 32 * 0.40 + 4 * 0.50) / 52)
    assert vision.keys == {"team": "vision"}
    assert vision.gpu_hours == pytest.approx(8.0)  # the hour inside the window
    assert vision.cpu_hours == pytest.approx(2.0)  # 4 processes × ½ h
    assert (vision.runs, vision.attempts, vision.preemptions, vision.util) == (2, 2, 0, None)
    assert vision.wait_mean_s == pytest.approx(300)


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        pytest.param(("gpu_model",), {("H100",): 52.0, ("A100",): 8.0, ("(none)",): 0}, id="model"),
        pytest.param(
            ("workflow",), {("w1",): 48.0, ("w3",): 8.0, ("w4",): 4.0, ("w2",): 0}, id="run"
        ),
        pytest.param(
            ("team", "queue"),
            {("research", "research-q"): 52.0, ("vision", "vision-q"): 8.0},
            id="team-queue",
        ),
        pytest.param((), {(): 60.0}, id="total"),
    ],
)
def test_grouped_by_any_keys(by: tuple[str, ...], expected: dict[tuple[str, ...], float]) -> None:
    rows = usage_rows(USED, WEEK, by)
    got = {tuple(r.keys.values()): r.gpu_hours for r in rows}
    assert got == pytest.approx(expected)


def test_team_filter_and_short_window() -> None:
    [row] = usage_rows(USED, Window.last(3600, NOW), ("team",), team="research")
    assert row.gpu_hours == pytest.approx(4.0) and row.attempts == 1
    assert usage_rows(USED, WEEK, ("team",), team="nobody") == []


def test_consecutive_windows_add_up() -> None:
    halves = [Window(WEEK.start_ms, NOW - 47 * H), Window(NOW - 47 * H, NOW)]
    split = sum(r.gpu_hours for w in halves for r in usage_rows(USED, w, ()))
    assert split == pytest.approx(usage_rows(USED, WEEK, ())[0].gpu_hours)


def test_a_killed_attempt_is_a_preemption_only_when_a_later_attempt_started() -> None:
    alone = Used(attempt(workflow="w9", status="KILLED"))
    assert survived([*USED, alone]) == [True, False, False, False, False, False, False]


def test_daily_splits_attempts_at_utc_midnight() -> None:
    late = Used(attempt(device="gpu", devices=2, start_ms=NOW - 13 * H, end_ms=NOW - 11 * H))
    series = daily([late, USED[2]], Window.last(2 * 86_400, NOW))
    assert series.device == "gpu"
    assert series.days == ["2026-12-05", "2026-12-06", "2026-12-07"]
    # 23:00 → 01:00: one hour each side of midnight, 2 GPUs
    assert series.hours == {"research": pytest.approx([0.0, 2.0, 2.0])}
    cpu = daily([USED[2]], Window.last(2 * 86_400, NOW))
    assert cpu.device == "cpu" and cpu.hours == {"vision": pytest.approx([2.0, 0.0, 0.0])}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("12h", 43_200), ("7d", 604_800), ("2w", 1_209_600), (" 1.5d", 129_600)],
)
def test_since(text: str, seconds: float) -> None:
    assert parse_since(text) == seconds


@pytest.mark.parametrize("text", ["7x", "7", "d", "", "1e3d", "5y"])
def test_a_malformed_since_names_the_option_and_the_form(text: str) -> None:
    with pytest.raises(PermanentError, match=r"--since .*number and a unit.*30m, 12h, 7d, 2w"):
        parse_since(text)


@pytest.mark.parametrize(
    ("text", "why"), [("-1d", "more than zero"), ("0h", "more than zero"), ("11000d", "ten years")]
)
def test_a_since_out_of_range_says_which_way(text: str, why: str) -> None:
    with pytest.raises(PermanentError, match=f"--since '{text}': .*{why}"):
        parse_since(text)


def test_by_keys() -> None:
    assert parse_by("team") == ("team",)
    assert parse_by("Team, queue,run,workflow") == ("team", "queue", "workflow")
    assert parse_by("gpu_model,step,pipeline") == ("gpu_model", "step", "pipeline")
    with pytest.raises(PermanentError, match="--by 'tema': not a key; did you mean 'team'"):
        parse_by("team,tema")


def test_promql_counts_only_what_the_window_added() -> None:
    q = prom_queries(("team",), WEEK, team="research")
    sel, r = 'gangway_device_seconds_total{team="research"}', "[604800000ms]"
    assert q["device_seconds"] == (
        f"sum by (team, device) (clamp_min(max_over_time({sel}{r}) "
        f"- (last_over_time({sel}{r} offset 604800000ms) or max_over_time({sel}{r}) * 0), 0))"
    )
    assert "DCGM_FI_DEV_GPU_UTIL[604800000ms]" in q["dcgm"] and "on (namespace, pod)" in q["dcgm"]
    with pytest.raises(PermanentError, match=r"--by gpu_model: Prometheus.*leave out --prometheus"):
        prom_by(("team", "gpu_model"))


def test_prom_rows_from_samples() -> None:
    rows = prom_rows(
        ("team",),
        {
            "device_seconds": [
                ({"team": "research", "device": "gpu"}, 36_000.0),
                ({"team": "research", "device": "cpu"}, 7_200.0),
                ({"team": "", "device": "cpu"}, 360.0),
            ],
            "attempts": [({"team": "research"}, 3.0)],
            "runs": [({"team": "research"}, 2.0), ({}, 1.0)],
            "mfu": [({"team": "research"}, 0.25)],
            "dcgm": [({"team": "research"}, 0.75)],
        },
    )
    research, none = rows
    assert (research.gpu_hours, research.cpu_hours, research.runs) == (10.0, 2.0, 2)
    assert (research.attempts, research.util, research.wait_mean_s) == (3, 0.75, None)
    assert (none.keys, none.cpu_hours, none.runs, none.attempts) == (
        {"team": "(none)"},
        0.1,
        1,
        None,
    )
    assert DAY_MS == 86_400_000
