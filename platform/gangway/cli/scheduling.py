"""``gangway snapshot``, ``queues``, ``explain`` and ``why``: decisions over a snapshot of the
clusters (live, from the platform config's kube contexts, or ``--snapshot FILE``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from gangway.cli._help import command_group
from gangway.cli._output import console, err_console, output_file, write_output
from gangway.cli.options import NameOpt, Output, OutputOpt
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.scheduling.placement import Placement
    from gangway.scheduling.snapshot.cluster_state import Snapshot

__all__ = [
    "GpuTypeOpt",
    "RegionOpt",
    "SnapshotOpt",
    "WithinOpt",
    "app",
    "decide_pipeline",
    "decide_workloads",
    "explain_cmd",
    "lineage_checkpoints",
    "queues_cmd",
    "read_snapshot",
    "why_cmd",
]

app = command_group(
    help="Snapshots of the clusters: what admission and placement decide over.",
    no_args_is_help=True,
)

SnapshotOpt = Annotated[
    str | None,
    typer.Option(
        "--snapshot",
        help="a snapshot file (`gangway snapshot save` writes one), or 'example' for the one "
        "shipped with Gangway; default: read the platform config's clusters live",
    ),
]
ParamOpt = Annotated[list[str] | None, typer.Option("-p", "--param", help="name=value")]
GpuTypeOpt = Annotated[
    str | None, typer.Option("--gpu-type", help="the GPU model the gang needs, e.g. H100")
]
WithinOpt = Annotated[
    str | None,
    typer.Option("--within", help="a topology tier the whole gang must stay within, e.g. rack"),
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--data-region",
        help="the region of the input data (default: from s3:// parameters in a region's bucket)",
    ),
]


def read_snapshot(
    source: str | None, clusters: list[str] | None = None, *, hint: str | None = None
) -> Any:
    """The snapshot to decide over: ``example``, a file, or the live clusters."""
    from gangway.scheduling.snapshot import EXAMPLE_SNAPSHOT, load_snapshot

    if source == "example":
        return load_snapshot(EXAMPLE_SNAPSHOT)
    if source is not None and not source.strip():
        raise PermanentError("--snapshot: empty; give a file, or 'example'")
    if source:
        return load_snapshot(Path(source))
    from gangway.config import load_config
    from gangway.scheduling.snapshot.live import live_snapshot

    cfg = load_config()
    unknown = [c for c in clusters or [] if c not in cfg.clusters]
    if unknown:
        known = ", ".join(sorted(cfg.clusters))
        raise PermanentError(f"--cluster {unknown[0]}: not in the platform config ({known})")

    def warn(message: str) -> None:
        err_console.print(Text(message, style="yellow"))

    with err_console.status("reading the clusters…"):
        return live_snapshot(cfg, clusters=clusters, warn=warn, hint=hint)


@app.command("save")
def save_cmd(
    output: Annotated[
        Path,
        typer.Option("-o", "--output", help="where to write it (missing directories are made)"),
    ] = Path("snapshot.yaml"),
    cluster: Annotated[
        list[str] | None, typer.Option("--cluster", help="only these clusters (repeatable)")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow, for when each running gang last saved a checkpoint"),
    ] = None,
) -> None:
    """Read the clusters and write a snapshot file for admission and placement.

    Nodes, pods, priority classes, Volcano queues, PodGroups and HyperNodes of each cluster of
    the platform config, as one YAML file (`--snapshot FILE` of explain, queues, why)."""
    from gangway.scheduling.snapshot import dump_snapshot

    output_file(output)  # refused now, not after minutes of reading clusters
    snap = read_snapshot(None, cluster, hint="check the kube contexts of the platform config")
    if tracking_uri:
        snap = lineage_checkpoints(snap, tracking_uri)
    write_output(output, dump_snapshot(snap))
    console.print(
        f"wrote {output} ({len(snap.clusters)} cluster(s))", soft_wrap=True, highlight=False
    )


def lineage_checkpoints(snap: Any, tracking_uri: str) -> Any:
    """``snap`` with each running gang's last checkpoint time from MLflow (as it was, with a
    warning, when MLflow does not answer)."""
    from gangway.lineage import store
    from gangway.lineage.checkpoints import last_checkpoints
    from gangway.scheduling.snapshot import with_checkpoints

    names = [g.workflow for c in snap.clusters.values() for g in c.gangs if g.workflow]
    try:
        marks = last_checkpoints(store.client(tracking_uri, write=False), names)
    except Exception as e:
        err_console.print(
            Text(f"no checkpoint times: {tracking_uri} did not answer: {e}", style="yellow")
        )
        return snap
    return with_checkpoints(snap, marks)


@app.command("show")
def show_cmd(snapshot: SnapshotOpt = None) -> None:
    """Summarise a snapshot: clusters, GPU models, free GPUs, gangs."""
    from gangway.cli.decisions import render_snapshot

    console.print(render_snapshot(read_snapshot(snapshot)))


def queues_cmd(
    cluster: Annotated[str | None, typer.Option(help="only this cluster")] = None,
    snapshot: SnapshotOpt = None,
) -> None:
    """Each queue's usage against its guarantee, deserved share and capability.

    Usage over the deserved share of a reclaimable queue is yellow: other queues may
    reclaim it."""
    from gangway.cli.decisions import render_queues

    snap = read_snapshot(snapshot, [cluster] if cluster and not snapshot else None)
    if cluster and cluster not in snap.clusters:
        from gangway.scheduling.pipeline_placement import not_in_snapshot

        raise not_in_snapshot(cluster, snap)
    console.print(render_queues(snap, cluster))


def decide_pipeline(
    obj: dict[str, Any],
    where: str,
    params: dict[str, str],
    snapshot: Snapshot,
    *,
    gpu_type: str | None,
    within: str | None,
    data_region: str | None,
    cluster: str | None = None,
) -> list[Placement]:
    """A placement for each gang of the pipeline ``obj`` (``where``: its file)
    (:func:`gangway.scheduling.pipeline_placement.place_pipeline`), its ``-p`` values checked
    first."""
    from gangway.config import load_config
    from gangway.scheduling import pipeline_placement as pp

    cfg = load_config()
    _refuse_bad_values(obj, params)
    regions = {c.region for c in snapshot.clusters.values()} | set(cfg.storage.buckets)
    region = pp.data_region(data_region, params.values(), regions, cfg.storage.buckets)
    products = {p: m for c in cfg.clusters.values() for m, p in c.gpu_products.items()}
    placements = pp.place_pipeline(
        obj,
        params,
        snapshot,
        region=region,
        product_models=products,
        gpu_type=gpu_type,
        within=within,
        cluster=cluster,
        where=where,
    )
    return placements


def _refuse_bad_values(obj: dict[str, Any], params: dict[str, str]) -> None:
    """The ``-p`` values, checked as ``gangway lint`` checks them, before anything is decided
    (the gang's GPU model is what placement adds, so it is not asked for here)."""
    from gangway.lint import CrdSchemas
    from gangway.lint.values import refuse_bad_values
    from gangway.scheduling.placement import Topology
    from gangway.scheduling.workload import place_gangs

    probe = Topology(tier=None, tier_name=None, hard=False, gpu_product="probe")
    refuse_bad_values(place_gangs(obj, {}, every=probe), params, CrdSchemas.from_env())


def explain_cmd(
    pipeline: Annotated[
        Path | None, typer.Argument(help="a pipeline file (.py) or its YAML")
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="a workload file (YAML: team, pods, per_pod, gpu_type, within, …; see "
            "docs/scheduling.md), or 'example' for the one shipped — instead of a pipeline",
        ),
    ] = None,
    param: ParamOpt = None,
    snapshot: SnapshotOpt = None,
    cluster: Annotated[str | None, typer.Option(help="decide for this cluster only")] = None,
    gpu_type: GpuTypeOpt = None,
    within: WithinOpt = None,
    data_region: RegionOpt = None,
    name: NameOpt = None,
    output: OutputOpt = Output.TABLE,
) -> None:
    """Where each gang of a pipeline — or of a workload file — would run, or why not; sends
    nothing.

    The decision is admit now, admit by preempting (which gangs, what they lose), wait (for
    what exactly) or reject (which field to change), per cluster, best first, with reasons.
    --output json prints the same as one JSON document (a list, a record per gang)."""
    from gangway.cli.decisions import placement_record, render_placement, render_source

    if (pipeline is None) == (workload is None):
        raise PermanentError(
            "explain: give a pipeline file or --workload FILE (one of them): "
            "gangway explain pipelines/x.py, or gangway explain --workload example"
        )
    snap = read_snapshot(snapshot)
    if workload is not None:
        placements = decide_workloads(
            workload,
            snap,
            param=param,
            name=name,
            gpu_type=gpu_type,
            within=within,
            data_region=data_region,
            cluster=cluster,
        )
    else:
        from gangway.cli.options import load_manifests, parse_params, submission_of

        assert pipeline is not None
        sub = submission_of(pipeline, load_manifests(pipeline), name)
        placements = decide_pipeline(
            sub.resolved,
            str(pipeline),
            parse_params(param),
            snap,
            gpu_type=gpu_type,
            within=within,
            data_region=data_region,
            cluster=cluster,
        )
    if output == Output.JSON:
        records = [placement_record(p, snap) for p in placements]
        typer.echo(json.dumps(records, indent=2))
        return
    console.print(render_source(snap))
    for p in placements:
        console.print(render_placement(p))


def decide_workloads(
    path: str,
    snap: Snapshot,
    *,
    param: list[str] | None,
    name: str | None,
    gpu_type: str | None,
    within: str | None,
    data_region: str | None,
    cluster: str | None,
) -> list[Placement]:
    """A placement for each workload of the file at ``path`` (``example``: the shipped one),
    each over ``snap`` as it is; ``--gpu-type``, ``--within`` and ``--data-region`` replace
    what the file says."""
    from dataclasses import replace

    from gangway.scheduling.capacity import view_of
    from gangway.scheduling.pipeline_placement import not_in_snapshot
    from gangway.scheduling.placement import place
    from gangway.scheduling.workload import load_workloads

    if param:
        raise PermanentError("-p: a workload file has no parameters; edit the file instead")
    if name:
        raise PermanentError("--name picks a document of a pipeline's YAML; not --workload")
    if cluster and cluster not in snap.clusters:
        raise not_in_snapshot(cluster, snap)
    fleet = view_of(snap)
    out = []
    for w in load_workloads(path):
        w = replace(
            w,
            gpu_type=gpu_type or w.gpu_type,
            within=within or w.within,
            data_region=data_region or w.data_region,
        )
        out.append(place(w, fleet, cluster=cluster))
    return out


def why_cmd(
    workflow: Annotated[str, typer.Argument(help="workflow name")],
    cluster: Annotated[
        str | None,
        typer.Option(help="the cluster it runs on, from the platform config (required)"),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="where the workflow runs (default: every namespace)")
    ] = None,
    snapshot: SnapshotOpt = None,
) -> None:
    """Why a workflow's gang is pending: Volcano's conditions and Gangway's decision.

    The PodGroup's conditions as Volcano wrote them, next to Gangway's decision over a fresh
    snapshot of the cluster (what it waits for, what would be evicted), on one screen."""
    from gangway.cli.decisions import render_why
    from gangway.cluster.settings import resolve_cluster
    from gangway.scheduling.pending import why_pending
    from gangway.scheduling.snapshot.live import list_workflow_gangs

    if not cluster:
        raise PermanentError(
            "why: pass --cluster NAME, a cluster of the platform config: its kube context is "
            "where the workflow's Volcano Jobs and PodGroups are read"
        )
    c = resolve_cluster(cluster)
    objs = list_workflow_gangs(c.kube_context, namespace, workflow)
    snap = read_snapshot(snapshot, [c.name])
    if c.name not in snap.clusters:
        from gangway.scheduling.pipeline_placement import not_in_snapshot

        raise not_in_snapshot(c.name, snap)
    gangs = why_pending(workflow, objs, snap, cluster=c.name)
    console.print(render_why(workflow, c.name, gangs))
