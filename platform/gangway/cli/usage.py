"""``gangway usage``: GPU-hours, queue wait, run time and utilisation over a window, by run,
pipeline, team, queue, GPU model or step — from MLflow lineage, or from Prometheus."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gangway.cli._output import console, err_console, output_file
from gangway.cli.options import Output, OutputOpt, StateDirOpt
from gangway.errors import NotFoundError, PermanentError, TransientError, describe
from gangway.lineage.usage import (
    Daily,
    UsageRow,
    Used,
    Window,
    daily,
    parse_by,
    parse_since,
    usage_rows,
)

__all__ = ["usage_cmd"]

SinceOpt = Annotated[
    str,
    typer.Option("--since", help="how far back the window reaches from now: 30m, 12h, 7d, 2w"),
]
TeamOpt = Annotated[str | None, typer.Option("--team", help="only this team's runs")]
ByOpt = Annotated[
    str,
    typer.Option(
        "--by",
        help="group by one or more of run (its workflow), pipeline, team, queue, gpu_model, "
        "step, comma-separated: --by team,queue",
    ),
]
TrackingUriOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        envvar="MLFLOW_TRACKING_URI",
        help="MLflow tracking server (http://...) or local store (sqlite:///...); without it, "
        "the store of the local runs in --state-dir",
    ),
]
PrometheusOpt = Annotated[
    str | None,
    typer.Option(
        "--prometheus",
        help="read device-hours, attempts and utilisation from this Prometheus "
        "(http://prometheus:9090) instead of MLflow lineage",
    ),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="also draw GPU-hours per team per day, stacked bars, to this PNG (needs "
        "matplotlib: pip install 'gangway[simulate]')",
    ),
]


def usage_cmd(
    since: SinceOpt = "7d",
    team: TeamOpt = None,
    by: ByOpt = "team",
    tracking_uri: TrackingUriOpt = None,
    state_dir: StateDirOpt = Path(".gangway"),
    prometheus: PrometheusOpt = None,
    output: OutputOpt = Output.TABLE,
    plot: PlotOpt = None,
) -> None:
    """GPU-hours, queue wait, run time and utilisation of step attempts over a window.

    Counted from what every step attempt records in MLflow lineage (its team, queue, GPUs,
    when it was submitted, ran and ended), so it works wherever the lineage is — a local
    sqlite store included, where the devices are CPU processes ("CPU-h"). The part of each
    attempt inside the window counts; a run still going counts up to now. Queue wait: from
    submitted to all its pods running; util: the mean MFU the training step logged (— where
    none); preempt: attempts killed and started again. With --prometheus URL, device-hours,
    attempts and utilisation (DCGM's GPU use where it is scraped, else MFU) come from the
    step metrics Prometheus holds (docs/observability.md).
    """
    keys = parse_by(by)
    window = Window.last(parse_since(since), int(time.time() * 1000))
    target = _plot_target(plot)
    if prometheus is not None:
        rows, series, note = _from_prometheus(prometheus, keys, window, team, target)
    else:
        rows, series, note = _from_lineage(tracking_uri, state_dir, keys, window, team, target)
    where = f"the last {since.strip()}" + (f", team {team}" if team is not None else "")
    if not rows:
        raise NotFoundError(
            f"no step ran in {where} in {note}; widen --since, check --team, or pass "
            "--tracking-uri (or --prometheus) of the store your steps record to"
        )
    if output == Output.JSON:
        doc: dict[str, object] = {"since": since, "team": team, "by": list(keys)}
        doc["source"] = note
        doc["window"] = {"start_ms": window.start_ms, "end_ms": window.end_ms}
        doc["rows"] = [r.to_json() for r in rows]
        doc["daily"] = series.to_json() if series else None
        typer.echo(json.dumps(doc, indent=2))
    else:
        _print(rows, keys, f"Usage, {where}", note)
    if target is not None and series is not None:
        from gangway.storage import write_atomic

        write_atomic(target, _draw(series, f"{series.device.upper()}-hours per team, {where}"))
        err_console.print(f"wrote {target}", markup=False, highlight=False)


def _plot_target(plot: Path | None) -> Path | None:
    """Where ``--plot`` writes, checked before any work (and matplotlib with it)."""
    if plot is None:
        return None
    target = output_file(plot, "--plot")
    if importlib.util.find_spec("matplotlib") is None:
        raise PermanentError(
            "--plot needs matplotlib, which is not installed here: pip install "
            "'gangway[simulate]' (or leave out --plot)"
        )
    return target


def _from_lineage(
    uri: str | None,
    state_dir: Path,
    keys: tuple[str, ...],
    window: Window,
    team: str | None,
    plot: Path | None,
) -> tuple[list[UsageRow], Daily | None, str]:
    from gangway.cli.lineage import local_store, open_to_read
    from gangway.lineage import store
    from gangway.lineage.usage_store import load_used

    uri = uri or local_store(state_dir)
    store.check(uri, write=False)
    client = open_to_read(uri, f"--tracking-uri {uri}: cannot open it")
    try:
        used: list[Used] = load_used(client, window, team)
    except Exception as e:
        raise TransientError(f"cannot read lineage from {uri}: {describe(e)}") from None
    if not used and team is not None:
        teams = sorted({u.attempt.team for u in load_used(client, None, None) if u.attempt.team})
        if teams:
            raise NotFoundError(
                f"--team {team}: no step runs of that team in {uri}; teams there: "
                f"{', '.join(teams)} (names are case-sensitive)"
            )
    if not used:
        raise NotFoundError(
            f"no Gangway step runs in {uri}: run a pipeline first (gangway run …), or "
            "pass --tracking-uri of the store your steps record to"
        )
    rows = usage_rows(used, window, keys, team)
    return rows, daily(used, window, team) if plot else None, uri


def _from_prometheus(
    url: str, keys: tuple[str, ...], window: Window, team: str | None, plot: Path | None
) -> tuple[list[UsageRow], Daily | None, str]:
    from gangway.cluster.usage import prom_daily, prom_usage

    rows, util = prom_usage(url, keys, window, team)
    series = prom_daily(url, window, team) if plot else None
    return rows, series, f"Prometheus {url}" + (f" (util: {util})" if util != "none" else "")


def _hours(h: float) -> str:
    return "0" if h == 0 else f"{h:.3f}" if h < 10 else f"{h:,.1f}"


def _wait(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


_HEADERS = {"workflow": "run", "gpu_model": "model"}


def _print(rows: list[UsageRow], keys: tuple[str, ...], title: str, source: str) -> None:
    """The rows as a table that fits 80 columns: the group's keys, then the numbers (a
    device kind no row used is left out; JSON has every field)."""
    table = Table(
        title=title,
        caption=f"from {source}",
        title_justify="left",
        caption_justify="left",
        box=None,
        pad_edge=False,
        collapse_padding=True,
    )
    for k in keys:
        table.add_column(_HEADERS.get(k, k), overflow="fold")
    kinds = [
        (name, attr)
        for name, attr in (("GPU-h", "gpu_hours"), ("CPU-h", "cpu_hours"))
        if any(getattr(r, attr) for r in rows)
    ] or [("GPU-h", "gpu_hours")]
    for col in ("runs", "tries", *(n for n, _ in kinds), "wait", "run h", "util", "preempt"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            *r.keys.values(),
            str(r.runs),
            "—" if r.attempts is None else str(r.attempts),
            *(_hours(getattr(r, attr)) for _, attr in kinds),
            _wait(r.wait_mean_s),
            "—" if r.run_hours is None else _hours(r.run_hours),
            "—" if r.util is None else f"{r.util:.0%}",
            "—" if r.preemptions is None else str(r.preemptions),
        )
    console.print(table)


def _draw(series: Daily, title: str) -> bytes:
    """Stacked bars: each team's device-hours on each day."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(series.days) + 3), 4), dpi=110)
    bottom = [0.0] * len(series.days)
    for team, hours in series.hours.items():
        ax.bar(series.days, hours, bottom=bottom, label=team)
        bottom = [b + h for b, h in zip(bottom, hours, strict=True)]
    ax.set_ylabel(f"{series.device.upper()}-hours")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45)
    if series.hours:
        ax.legend(fontsize="small")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    out: Any = buf.getvalue()
    return bytes(out)
