"""``gangway simulate``: replay a GPU-cluster trace (or a snapshot's nodes and a workload file)
against placement policies, by the method of docs/simulation.md."""

from __future__ import annotations

import importlib.util
import os
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
        "'example' (1,024 H100 in racks and blocks)",
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
    float,
    typer.Option("--hours", help="with --gangs: how long to replay, hours; in (0, 8760]"),
]


def simulate_cmd(
    pods: Annotated[
        str | None,
        typer.Option(
            "--pods",
            help="the pod list CSV: columns name, cpu_milli, memory_mib, num_gpu, gpu_milli "
            "and optionally gpu_spec (GPU models separated by |)",
        ),
    ] = None,
    gangs: GangsOption = None,
    fleet: FleetOption = None,
    layout: LayoutOption = "8,4",
    load: LoadOption = 1.0,
    hours: HoursOption = 336.0,
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes", help="the node list CSV: columns sn, cpu_milli, memory_mib, gpu, model"
        ),
    ] = None,
    snapshot: Annotated[
        str | None,
        typer.Option(
            "--snapshot",
            help="instead of --nodes: a snapshot file (`gangway snapshot save`), or 'example'",
        ),
    ] = None,
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
    """
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
    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("gangs"))
    runs = []
    try:
        with Progress(*columns, console=err_console, transient=True) as bar:
            task = bar.add_task("replay", total=total)
            for s, jobs in workloads.items():
                for name in names:
                    advance = lambda n: bar.advance(task, n)  # noqa: E731
                    runs.append(
                        replay_gangs(fleet, jobs, name, seed=s, horizon_s=horizon, progress=advance)
                    )
    except KeyboardInterrupt:
        raise Interrupted("interrupted: no results written") from None
    return runs


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
