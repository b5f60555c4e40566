"""``gangway simulate``: replay a GPU-cluster trace (or a snapshot's nodes and a workload file)
against placement policies, by the method of docs/simulation.md."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from gangway.cli._output import console, err_console, output_dir
from gangway.errors import Interrupted, PermanentError, chosen_cluster, closest

__all__ = ["simulate_cmd"]

POLICY_HELP = (
    "comma-separated: random, bestfit (the method's baselines), gangway (Gangway's packing "
    "rule), fgd (a re-implementation of FGD)"
)


GANG_POLICY_HELP = "with --gangs: comma-separated gangway, binpack, random"

GangsOption = Annotated[
    str | None,
    typer.Option(
        "--gangs",
        help="instead of --pods, replay gangs over time: a gang workload CSV (name, "
        "arrival_s, pods, gpus_per_pod, duration_s [, within, gpu_model, team]), or "
        "'generate' for the published job-size mix (docs/simulation.md)",
    ),
]
FleetOption = Annotated[
    str | None,
    typer.Option(
        "--fleet",
        help="with --gangs: the platform config whose cluster the gangs run on, or "
        "'example' (1,024 H100 in racks and blocks); with --workload: a platform config (every "
        "cluster with gpus:) or a snapshot file, or 'example' (two clusters, three teams)",
    ),
]
WorkloadOption = Annotated[
    str | None,
    typer.Option(
        "--workload",
        help="the fleet twin: replay gangs through the platform's own admission, preemption "
        "and placement — 'generate' (the published job-size mix, teams by deserved share), "
        "'openb' (the trace's own timestamps, from $GANGWAY_TRACE_DIR, or openb:FILE), or a "
        "CSV (name, arrival_s, team, pods, gpus_per_pod, duration_s [, gpu_model, within, "
        "priority_class, queue, checkpoint_s]); docs/capacity.md",
    ),
]
WhatIfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--what-if",
        help="with --workload, repeatable: another full replay with add-nodes=WHERE:MODEL:N, "
        "deserved=TEAM:±P%[,TEAM:±P%] or checkpoint-every=DURATION, beside the twin",
    ),
]
CheckpointOption = Annotated[
    str,
    typer.Option(
        "--checkpoint-every",
        help="with --workload: how often a gang that names no interval saves a checkpoint "
        "(30m, 2h; 0: never) — what a preempted gang keeps",
    ),
]
LayoutOption = Annotated[
    str,
    typer.Option(
        "--layout",
        help="with --gangs: nodes a domain of the first tier, then domains a domain of "
        "each next tier (8,4: 8 nodes a rack, 4 racks a block)",
    ),
]
LoadOption = Annotated[
    float,
    typer.Option("--load", help="with --gangs generate: offered GPU load, × the fleet; in (0, 5]"),
]
HoursOption = Annotated[
    float | None,
    typer.Option(
        "--hours",
        help="with --gangs or --workload: how long to replay, hours; in (0, 8760] (default 336 "
        "with --gangs, 720 with --workload, the trace's span with --workload openb)",
    ),
]


PodsOption = Annotated[
    str | None,
    typer.Option(
        "--pods",
        help="the pod list CSV: columns name, cpu_milli, memory_mib, num_gpu, gpu_milli "
        "and optionally gpu_spec (GPU models separated by |)",
    ),
]
NodesOption = Annotated[
    str | None,
    typer.Option(
        "--nodes", help="the node list CSV: columns sn, cpu_milli, memory_mib, gpu, model"
    ),
]
SnapshotOption = Annotated[
    str | None,
    typer.Option(
        "--snapshot",
        help="instead of --nodes: a snapshot file (`gangway snapshot save`), or 'example'",
    ),
]


def simulate_cmd(
    pods: PodsOption = None,
    gangs: GangsOption = None,
    workload: WorkloadOption = None,
    fleet: FleetOption = None,
    what_if: WhatIfOption = None,
    checkpoint_every: CheckpointOption = "1h",
    layout: LayoutOption = "8,4",
    load: LoadOption = 1.0,
    hours: HoursOption = None,
    nodes: NodesOption = None,
    snapshot: SnapshotOption = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="with --snapshot or --fleet: which cluster")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy", help=f"{POLICY_HELP} (default random,bestfit,gangway); {GANG_POLICY_HELP}"
        ),
    ] = None,
    seeds: Annotated[
        int, typer.Option("--seeds", help="how many seeds, 1 to 1000 (42, 43, …)")
    ] = 10,
    tune: Annotated[
        float,
        typer.Option(
            "--tune",
            help="after the pod list itself, copies of its pods arrive until the GPU demand "
            "reaches this × the GPU capacity; in (0, 10]",
        ),
    ] = 1.3,
    out: Annotated[
        str, typer.Option("--out", help="the directory the results go to (made if missing)")
    ] = "simulation",
    jobs: Annotated[
        int, typer.Option("--jobs", help="replays at once (processes); at most the CPU count")
    ] = 1,
) -> None:
    """Replay a workload against placement policies: GPU allocation vs arrived demand.

    Pods arrive one at a time (the pod list shuffled per seed, then copies drawn from it until
    the GPU demand reaches --tune × the capacity) and are placed at once or dropped; the
    metric is GPU allocation % against arrived demand % (0–130), by the method of the FGD
    paper's artifact (docs/simulation.md). Writes OUT/allocation.csv, OUT/summary.md and
    OUT/allocation.png.

    The node and pod lists are CSV with the columns of Alibaba's cluster-trace-gpu-v2023;
    for capacity planning, take the nodes from a snapshot (--snapshot FILE --cluster NAME)
    and write your own workload as a pod list.

    With --gangs instead of --pods, all-or-nothing gangs (N pods × G GPUs, some held to one
    topology domain) arrive over --hours on a --fleet built from a platform config, queue
    until they fit, run and leave — placed by the scheduler's own decisions (gangway) and by
    two baselines (binpack, random). Writes OUT/gang_summary.md, gang_results.csv,
    gang_allocation.csv and gang_allocation.png (and OUT/gangs.csv when generated).

    With --workload instead, the fleet twin: gangs of teams, queues and priority classes
    arrive over --hours on every cluster of --fleet and go through the platform's own
    admission, preemption and placement (what `submit --cluster auto` runs), with Volcano's
    queue order, quotas and reclaim; preempted gangs lose the work since their last checkpoint
    and queue again. Beside it, two baselines (no preemption; FIFO + first fit) and one replay
    per --what-if. Writes OUT/twin_summary.md, twin_queues.csv, twin_gangs.csv,
    twin_allocation.csv and twin_allocation.png (and OUT/workload.csv when generated).
    """
    if workload is not None:
        _only_twin(gangs, pods, nodes, snapshot)
        twin = _TwinArgs(workload, fleet, what_if or [], checkpoint_every, layout, load, hours)
        return _simulate_twin(twin, seeds, out)
    if what_if:
        raise PermanentError("--what-if goes with --workload (the fleet twin)")
    hours = 336.0 if hours is None else hours
    if gangs is not None:
        if pods is not None or nodes is not None or snapshot is not None:
            raise PermanentError(
                "--gangs replays gangs on a --fleet: leave out --pods, --nodes and --snapshot"
            )
        _simulate_gangs(gangs, fleet, cluster, layout, load, hours, policy, seeds, out)
        return
    _simulate_pods(pods, nodes, snapshot, fleet, cluster, policy, seeds, tune, out, jobs)


def _simulate_pods(
    pods: str | None,
    nodes: str | None,
    snapshot: str | None,
    fleet: str | None,
    cluster: str | None,
    policy: str | None,
    seeds: int,
    tune: float,
    out: str,
    jobs: int,
) -> None:
    if pods is None:
        raise PermanentError(
            "give the workload: --pods FILE (one pod at a time, the FGD method) or --gangs "
            "FILE|generate (gangs over time on a --fleet)"
        )
    if fleet is not None:
        raise PermanentError("--fleet goes with --gangs; with --pods give --nodes or --snapshot")
    from gangway.scheduling.simulation.run import FIRST_SEED, Workload, check_policies

    names = check_policies((policy or "random,bestfit,gangway").split(","))
    _check_counts(seeds, jobs)
    target = _out_dir(out)
    pod_file = _file("--pods", pods)
    work = Workload(tuple(_nodes(nodes, snapshot, cluster)), tuple(_pods(pod_file)), tune)
    work.check()
    hopeless = _warn_never_fit(pod_file, work)
    with_plot = _warn_machine(jobs)
    runs = _replay(work, names, range(FIRST_SEED, FIRST_SEED + seeds), jobs)
    _print(runs)
    from gangway.scheduling.simulation.report import write_outputs

    source = f"--snapshot {snapshot}" + (f" --cluster {cluster}" if cluster else "")
    last = FIRST_SEED + seeds - 1
    about = [
        f"nodes: {nodes if nodes else source} ({len(work.nodes)} nodes, {work.capacity_gpus} GPUs)",
        f"pods: {pods} ({len(work.pods)} pods; {hopeless} that no node could take)",
        (f"seeds {FIRST_SEED}–{last}" if seeds > 1 else f"seed {FIRST_SEED}") + f", tune {tune}",
    ]
    title = f"GPU allocation: {pod_file.name}"
    for path in write_outputs(target, runs, title=title, about=about, with_plot=with_plot):
        console.print(f"wrote {path}", markup=False, highlight=False)


def _simulate_gangs(
    source: str,
    fleet_source: str | None,
    cluster: str | None,
    layout: str,
    load: float,
    hours: float,
    policy: str | None,
    seeds: int,
    out: str,
) -> None:
    from gangway.scheduling.simulation.fleet import build_fleet, parse_layout
    from gangway.scheduling.simulation.gang_workload import check_jobs, gangs_csv, read_gangs
    from gangway.scheduling.simulation.gangs import GANG_POLICIES
    from gangway.scheduling.simulation.run import FIRST_SEED

    names = [p.strip() for p in (policy or ",".join(GANG_POLICIES)).split(",")]
    for name in names:
        if name not in GANG_POLICIES:
            near = closest(name, list(GANG_POLICIES))
            hint = f"; did you mean {near!r}?" if near else ""
            raise PermanentError(
                f"--policy {name!r}: with --gangs, one of {', '.join(GANG_POLICIES)}{hint}"
            )
    _check_counts(seeds, 1)
    if not 0 < hours <= 8760:
        raise PermanentError(f"--hours {hours:g}: give more than 0 and at most 8760 (a year)")
    if not 0 < load <= 5:
        raise PermanentError(f"--load {load:g}: give more than 0 and at most 5")
    if fleet_source is None:
        raise PermanentError("--gangs needs --fleet: a platform config file, or 'example'")
    target = _out_dir(out)
    fleet = build_fleet(fleet_source, cluster, parse_layout(layout))
    generated = source == "generate"
    if generated:
        given = None
    else:
        path = _file("--gangs", source)
        given = read_gangs(path)
        check_jobs(str(path), given, fleet)
    runs = _replay_gangs(fleet, given, names, range(FIRST_SEED, FIRST_SEED + seeds), load, hours)
    _print_gangs(runs)
    from gangway.scheduling.simulation.gang_report import write_gang_outputs
    from gangway.storage import write_atomic

    with_plot = _warn_machine(1, "gang_allocation.png")
    about = [
        f"fleet: {fleet_source} — {fleet.describe()}",
        (
            f"gangs: generated, offered load {load:g}, a new draw per seed"
            if generated
            else f"gangs: {source} ({len(given or [])} gangs)"
        ),
        f"{hours:g} hours; seeds {FIRST_SEED}–{FIRST_SEED + seeds - 1}",
    ]
    title = f"Gangs on {fleet.cluster}" + (f", load {load:g}" if generated else "")
    written = write_gang_outputs(target, runs, title=title, about=about, with_plot=with_plot)
    if generated:
        from gangway.scheduling.simulation.gang_workload import generate

        first = generate(fleet, load=load, hours=hours, seed=FIRST_SEED)
        write_atomic(target / "gangs.csv", gangs_csv(first).encode())
        written.append(target / "gangs.csv")
    for path in written:
        console.print(f"wrote {path}", markup=False, highlight=False)


def _only_twin(*others: str | None) -> None:
    if any(o is not None for o in others):
        raise PermanentError(
            "--workload replays gangs on a --fleet: leave out --gangs, --pods, --nodes and "
            "--snapshot (give a snapshot as --fleet)"
        )


@dataclass(frozen=True)
class _TwinArgs:
    workload: str
    fleet: str | None
    what_ifs: list[str]
    checkpoint_every: str
    layout: str
    load: float
    hours: float | None


def _twin_workload(args: _TwinArgs, fleet: Any, seed: int) -> tuple[list[Any], float, str]:
    """The gangs, the hours to replay, and a line saying where they came from."""
    from gangway.scheduling.simulation import twin_workload as tw

    if args.workload == "generate":
        hours = 720.0 if args.hours is None else args.hours
        gangs = tw.generate_twin(fleet, load=args.load, hours=hours, seed=seed)
        return gangs, hours, f"generated, offered load {args.load:g}, seed {seed}"
    if args.workload == "openb" or args.workload.startswith("openb:"):
        path = _openb_file(args.workload)
        gangs = tw.read_openb(path, fleet)
        span = max((g.arrival_s + g.duration_s for g in gangs), default=0) / 3600
        hours = span if args.hours is None else args.hours
        return gangs, hours, f"openb on its own clock: {path} ({len(gangs)} GPU pods)"
    path = _file("--workload", args.workload)
    gangs = tw.read_twin_gangs(path)
    hours = 720.0 if args.hours is None else args.hours
    return gangs, hours, f"{path} ({len(gangs)} gangs)"


def _openb_file(raw: str) -> Path:
    if raw.startswith("openb:"):
        return _file("--workload openb:", raw.removeprefix("openb:"))
    trace = os.environ.get("GANGWAY_TRACE_DIR")
    if not trace:
        raise PermanentError(
            "--workload openb: set GANGWAY_TRACE_DIR to the Alibaba openb v2023 trace's "
            "directory, or give --workload openb:FILE"
        )
    return Path(trace) / "openb_pod_list_default.csv"


def _simulate_twin(args: _TwinArgs, seeds: int, out: str) -> None:
    from gangway.scheduling.simulation.fleet import parse_layout
    from gangway.scheduling.simulation.run import FIRST_SEED
    from gangway.scheduling.simulation.twin import TwinSettings
    from gangway.scheduling.simulation.twin_fleet import twin_fleet
    from gangway.scheduling.simulation.twin_report import write_twin_outputs
    from gangway.scheduling.simulation.twin_workload import twin_csv
    from gangway.scheduling.simulation.what_if import parse_duration, parse_what_if, replays
    from gangway.storage import write_atomic

    if args.fleet is None:
        raise PermanentError(
            "--workload needs --fleet: a platform config, a snapshot, or 'example'"
        )
    if not 0 < args.load <= 5:
        raise PermanentError(f"--load {args.load:g}: give more than 0 and at most 5")
    if seeds != 10 and seeds != 1:
        raise PermanentError("--workload replays one seed (42): leave out --seeds")
    every = parse_duration(args.checkpoint_every, "--checkpoint-every")
    target = _out_dir(out)
    fleet = twin_fleet(args.fleet, parse_layout(args.layout))
    changes = [parse_what_if(w, fleet) for w in args.what_ifs]
    gangs, hours, source = _twin_workload(args, fleet, FIRST_SEED)
    if not 0 < hours <= 8760:
        raise PermanentError(f"--hours {hours:g}: give more than 0 and at most 8760 (a year)")
    base = TwinSettings(horizon_s=round(hours * 3600), checkpoint_s=every)
    runs = _replay_twins(replays(fleet, gangs, base, changes))
    _print_twin(runs)
    with_plot = _warn_machine(1, "twin_allocation.png")
    about = [
        f"fleet: {args.fleet} — {fleet.describe()}",
        f"workload: {source}",
        f"{hours:g} hours; checkpoints every {args.checkpoint_every} unless a gang names one",
    ]
    title = f"Fleet twin: {args.fleet}, {args.workload}"
    written = write_twin_outputs(target, runs, title=title, about=about, with_plot=with_plot)
    if args.workload == "generate":
        write_atomic(target / "workload.csv", twin_csv(gangs).encode())
        written.append(target / "workload.csv")
    for path in written:
        console.print(f"wrote {path}", markup=False, highlight=False)


def _replay_twins(plan: list[Any]) -> list[Any]:
    from gangway.scheduling.simulation.twin import replay_twin

    total = sum(len(gangs) for _, gangs, _ in plan)
    with _gangs_bar(total) as advance:
        return [replay_twin(f, gangs, settings, progress=advance) for f, gangs, settings in plan]


@contextlib.contextmanager
def _gangs_bar(total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar over ``total`` gangs replayed (on stderr, gone when done); yields the
    callable that advances it. Ctrl-C ends the command with nothing written."""
    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("gangs"))
    try:
        with Progress(*columns, console=err_console, transient=True) as bar:
            task = bar.add_task("replay", total=total)
            yield lambda n: bar.advance(task, n)
    except KeyboardInterrupt:
        raise Interrupted("interrupted: no results written") from None


def _print_twin(runs: list[Any]) -> None:
    from gangway.scheduling.simulation.twin_report import queue_rows

    table = Table(title="Fleet twin: side by side")
    for col in ("replay", "GPU alloc %", "wait p50/p95/p99 h", "preempted", "GPU-h lost"):
        table.add_column(col, justify="left" if col == "replay" else "right")
    table.add_column("never fit", justify="right")
    table.add_column("not started", justify="right")
    for run in runs:
        r = queue_rows(run)[-1]
        table.add_row(
            run.name,
            f"{r.share:.1f}",
            " / ".join(f"{w:.1f}" for w in r.wait_h),
            str(r.preemptions),
            f"{r.lost_gpu_hours:,.0f}",
            str(r.never_fit),
            str(r.not_started),
        )
    console.print(table)


def _replay_gangs(
    fleet: Any, given: list[Any] | None, names: list[str], seeds: range, load: float, hours: float
) -> list[Any]:
    from gangway.scheduling.simulation.gang_workload import generate
    from gangway.scheduling.simulation.gangs import replay_gangs

    horizon = round(hours * 3600)
    workloads = {
        s: given if given is not None else generate(fleet, load=load, hours=hours, seed=s)
        for s in seeds
    }
    total = sum(len(w) for w in workloads.values()) * len(names)
    with _gangs_bar(total) as advance:
        return [
            replay_gangs(fleet, jobs, name, seed=s, horizon_s=horizon, progress=advance)
            for s, jobs in workloads.items()
            for name in names
        ]


def _print_gangs(runs: list[Any]) -> None:
    from gangway.scheduling.simulation.gang_report import gang_headlines

    table = Table(title="Gangs: placement quality (mean over seeds)")
    for col in ("policy", "GPU alloc %", "tightest %", "waited, GPUs free %", "wait h (1 / multi)"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for h in gang_headlines(runs):
        table.add_row(
            h.policy,
            f"{h.allocation:.1f}",
            f"{h.tightest:.1f}",
            f"{h.waited_with_room:.1f}",
            f"{h.wait_one[0]:.2f} / {h.wait_multi[0]:.2f}",
        )
    console.print(table)


def _check_counts(seeds: int, jobs: int) -> None:
    if seeds < 1 or seeds > 1000:
        raise PermanentError(f"--seeds {seeds}: give 1 to 1000")
    if jobs < 1:
        raise PermanentError(f"--jobs {jobs}: give 1 or more")


def _warn_machine(jobs: int, png: str = "allocation.png") -> bool:
    """Warn of what this machine lacks for the run; whether the plot can be drawn."""
    if jobs > (os.cpu_count() or 1):
        err_console.print(
            f"warning: --jobs {jobs} is more than the {os.cpu_count()} CPUs here; "
            "the replays will share them",
            markup=False,
        )
    with_plot = importlib.util.find_spec("matplotlib") is not None
    if not with_plot:
        err_console.print(
            f"warning: no matplotlib here, so no {png} (an earlier one in --out is "
            "removed); pip install 'gangway[simulate]'",
            markup=False,
        )
    return with_plot


def _warn_never_fit(path: Path, work: Any) -> int:
    """Say which pods no node could take even when empty (they will count as failed)."""
    from gangway.scheduling.simulation.trace import never_fit

    hopeless = never_fit(work.nodes, work.pods)
    if hopeless:
        shown = "".join(f"\n  {path}:{p.line}: column {why}" for p, why in hopeless[:5])
        more = f"\n  … and {len(hopeless) - 5} more" if len(hopeless) > 5 else ""
        err_console.print(
            f"warning: {len(hopeless)} pod(s) can never be placed on these nodes and will "
            f"count as failed:{shown}{more}",
            markup=False,
            highlight=False,
        )
    return len(hopeless)


def _file(option: str, raw: str) -> Path:
    if not raw.strip():
        raise PermanentError(f"{option}: give a file")
    return Path(raw)


def _out_dir(raw: str) -> Path:
    """``--out``, checked before minutes of replay: a directory, or one that can be made."""
    if not raw.strip():
        raise PermanentError("--out: give a directory")
    return output_dir(Path(raw), "--out")


def _pods(path: Path) -> list[Any]:
    from gangway.scheduling.simulation.trace import read_pods

    return read_pods(path)


def _nodes(path: str | None, snapshot: str | None, cluster: str | None) -> list[Any]:
    from gangway.scheduling.simulation.trace import nodes_of, read_nodes

    if path is not None and snapshot is not None:
        raise PermanentError("give --nodes FILE or --snapshot FILE, not both")
    if path is None and snapshot is None:
        raise PermanentError(
            "give the nodes: --nodes FILE, or --snapshot FILE --cluster NAME "
            "(--snapshot example for a sample)"
        )
    if path is not None:
        if cluster:
            raise PermanentError("--cluster goes with --snapshot, not with --nodes")
        return read_nodes(_file("--nodes", path))
    from gangway.cli.scheduling import read_snapshot

    snap = read_snapshot(snapshot)
    cluster = chosen_cluster(cluster, snap.clusters, "the snapshot")
    found = nodes_of(snap.clusters[cluster])
    if not found:
        raise PermanentError(f"--cluster {cluster}: no schedulable node in {snapshot}")
    return found


def _replay(work: Any, names: list[str], seeds: range, jobs: int) -> list[Any]:
    from gangway.scheduling.simulation.run import arrivals_per_seed, simulate

    total = sum(arrivals_per_seed(work, seeds).values()) * len(names)
    columns = (
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pods"),
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, console=err_console, transient=True) as bar:
            task = bar.add_task("replay", total=total)
            advance = lambda n: bar.advance(task, n)  # noqa: E731
            return simulate(work, names, seeds, jobs=jobs, progress=advance)
    except KeyboardInterrupt:
        raise Interrupted("interrupted: no results written") from None


def _print(runs: list[Any]) -> None:
    from gangway.scheduling.simulation.report import headlines, pct
    from gangway.scheduling.simulation.run import MARKS

    table = Table(title="GPU allocation % (mean ± sd over seeds)")
    table.add_column("policy")
    for k in MARKS:
        table.add_column(f"at {k} %", justify="right")
    table.add_column("failed pods", justify="right")
    table.add_column("fragmented at 100 %", justify="right")
    table.add_column("µs / pod", justify="right")
    for h in headlines(runs):
        cells = [f"{pct(h.at[k][0])} ± {pct(h.at[k][1])}" for k in MARKS]
        table.add_row(
            h.policy,
            *cells,
            f"{h.failed:.0f}",
            f"{pct(h.fragmented[100])} %",
            f"{h.micros_per_pod:.0f}",
        )
    console.print(table)
