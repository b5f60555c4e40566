"""``gangway simulate``: replay a GPU-cluster trace (or a snapshot's nodes and a workload file)
against placement policies, by the method of docs/simulation.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from gangway.cli._output import console, err_console
from gangway.errors import PermanentError, closest

__all__ = ["simulate_cmd"]

POLICY_HELP = (
    "comma-separated: random, bestfit (the method's baselines), gangway (Gangway's packing "
    "rule), fgd (a re-implementation of FGD)"
)


def simulate_cmd(
    pods: Annotated[
        Path,
        typer.Option(
            "--pods",
            help="the pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec])",
        ),
    ],
    nodes: Annotated[
        Path | None,
        typer.Option("--nodes", help="the node list CSV (sn,cpu_milli,memory_mib,gpu,model)"),
    ] = None,
    snapshot: Annotated[
        str | None,
        typer.Option(
            "--snapshot",
            help="instead of --nodes: a snapshot file (`gangway snapshot save`), or 'example'",
        ),
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="with --snapshot: which of its clusters")
    ] = None,
    policy: Annotated[str, typer.Option("--policy", help=POLICY_HELP)] = "random,bestfit,gangway",
    seeds: Annotated[int, typer.Option("--seeds", help="how many seeds (42, 43, …)")] = 10,
    tune: Annotated[
        float, typer.Option("--tune", help="arrivals stop at this × the GPU capacity")
    ] = 1.3,
    out: Annotated[Path, typer.Option("--out", help="where the results go")] = Path(
        "simulation"
    ),
    jobs: Annotated[int, typer.Option("--jobs", help="replays at once (processes)")] = 1,
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
    """
    from gangway.simulation.run import FIRST_SEED, Workload, check_policies

    names = check_policies(policy.split(","))
    if seeds < 1 or seeds > 1000:
        raise PermanentError(f"--seeds {seeds}: give 1 to 1000")
    if jobs < 1:
        raise PermanentError(f"--jobs {jobs}: give 1 or more")
    target = _out_dir(out)
    work = Workload(tuple(_nodes(nodes, snapshot, cluster)), tuple(_pods(pods)), tune)
    work.check()
    with_plot = importlib.util.find_spec("matplotlib") is not None
    if not with_plot:
        err_console.print(
            "warning: no matplotlib here, so no allocation.png; pip install 'gangway[simulate]'"
        )
    runs = _replay(work, names, range(FIRST_SEED, FIRST_SEED + seeds), jobs)
    _print(runs)
    from gangway.simulation.report import write_outputs

    source = f"--snapshot {snapshot}" + (f" --cluster {cluster}" if cluster else "")
    about = [
        f"nodes: {nodes if nodes else source} ({len(work.nodes)} nodes, "
        f"{work.capacity_gpus} GPUs)",
        f"pods: {pods} ({len(work.pods)} pods)",
        f"seeds {FIRST_SEED}–{FIRST_SEED + seeds - 1}, tune {tune}",
    ]
    title = f"GPU allocation: {pods.name}"
    for path in write_outputs(target, runs, title=title, about=about, with_plot=with_plot):
        console.print(f"wrote {path}")


def _out_dir(out: Path) -> Path:
    if str(out).strip() in ("",):
        raise PermanentError("--out: give a directory")
    if out.exists() and not out.is_dir():
        raise PermanentError(f"--out {out}: not a directory; give a directory for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PermanentError(f"--out {out}: cannot create it: {e.strerror or e}") from None
    return out


def _pods(path: Path) -> list[Any]:
    from gangway.simulation.trace import read_pods

    return read_pods(path)


def _nodes(path: Path | None, snapshot: str | None, cluster: str | None) -> list[Any]:
    from gangway.simulation.trace import nodes_of, read_nodes

    if (path is None) == (snapshot is None):
        raise PermanentError("give the nodes: --nodes FILE, or --snapshot FILE --cluster NAME")
    if path is not None:
        if cluster:
            raise PermanentError("--cluster goes with --snapshot, not with --nodes")
        return read_nodes(path)
    from gangway.cli.scheduling import read_snapshot

    snap = read_snapshot(snapshot)
    known = sorted(snap.clusters)
    if cluster is None and len(known) == 1:
        cluster = known[0]
    if cluster not in snap.clusters:
        near = closest(cluster or "", known)
        hint = f"; did you mean {near!r}?" if near else ""
        what = f"--cluster {cluster}: not in the snapshot" if cluster else "give --cluster"
        raise PermanentError(f"{what} (one of {', '.join(known)}){hint}")
    return nodes_of(snap.clusters[cluster])


def _replay(work: Any, names: list[str], seeds: range, jobs: int) -> list[Any]:
    from gangway.simulation.run import arrivals_per_seed, simulate

    total = sum(arrivals_per_seed(work, seeds).values()) * len(names)
    columns = (
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pods"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("replay", total=total)
        return simulate(
            work, names, seeds, jobs=jobs, progress=lambda n: bar.advance(task, n)
        )


def _print(runs: list[Any]) -> None:
    from gangway.simulation.report import headlines
    from gangway.simulation.run import MARKS

    table = Table(title="GPU allocation % (mean ± sd over seeds)")
    table.add_column("policy")
    for k in MARKS:
        table.add_column(f"at {k} %", justify="right")
    table.add_column("failed pods", justify="right")
    table.add_column("fragmented at 100 %", justify="right")
    table.add_column("µs / pod", justify="right")
    for h in headlines(runs):
        cells = [f"{h.at[k][0]:.2f} ± {h.at[k][1]:.2f}" for k in MARKS]
        table.add_row(
            h.policy,
            *cells,
            f"{h.failed:.0f}",
            f"{h.fragmented[100]:.2f} %",
            f"{h.micros_per_pod:.0f}",
        )
    console.print(table)
