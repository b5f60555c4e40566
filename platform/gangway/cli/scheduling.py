"""``gangway snapshot``, ``queues``, ``explain`` and ``why``: decisions over a snapshot of the
clusters (live, from the platform config's kube contexts, or ``--snapshot FILE``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gangway.cli._output import console, err_console
from gangway.errors import PermanentError

__all__ = [
    "GpuTypeOpt",
    "RegionOpt",
    "SnapshotOpt",
    "WithinOpt",
    "app",
    "decide_pipeline",
    "explain_cmd",
    "queues_cmd",
    "read_snapshot",
    "why_cmd",
]

app = typer.Typer(
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


def read_snapshot(source: str | None, clusters: list[str] | None = None) -> Any:
    """The snapshot to decide over: ``example``, a file, or the live clusters."""
    from gangway.snapshot import EXAMPLE_SNAPSHOT, load_snapshot

    if source == "example":
        return load_snapshot(EXAMPLE_SNAPSHOT)
    if source:
        return load_snapshot(Path(source))
    from gangway.config import load_config
    from gangway.snapshot.live import live_snapshot

    cfg = load_config()
    unknown = [c for c in clusters or [] if c not in cfg.clusters]
    if unknown:
        known = ", ".join(sorted(cfg.clusters))
        raise PermanentError(f"--cluster {unknown[0]}: not in the platform config ({known})")
    with err_console.status("reading the clusters…"):
        return live_snapshot(
            cfg, clusters=clusters, warn=lambda m: err_console.print(f"[yellow]{m}[/]")
        )


@app.command("save")
def save_cmd(
    output: Annotated[Path, typer.Option("-o", "--output", help="where to write it")] = Path(
        "snapshot.yaml"
    ),
    cluster: Annotated[
        list[str] | None, typer.Option("--cluster", help="only these clusters (repeatable)")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow, for when each running gang last saved a checkpoint"),
    ] = None,
) -> None:
    """Read the platform config's clusters (nodes, pods, Volcano queues, PodGroups, HyperNodes)
    and write what admission and placement need as one YAML file."""
    from gangway.snapshot import dump_snapshot

    snap = read_snapshot(None, cluster)
    if tracking_uri:
        snap = _with_checkpoints(snap, tracking_uri)
    tmp = output.with_name(output.name + ".tmp")
    try:
        tmp.write_text(dump_snapshot(snap), encoding="utf-8")
        tmp.replace(output)
    except OSError as e:
        raise PermanentError(f"-o {output}: cannot write it: {e.strerror or e}") from None
    console.print(f"wrote {output} ({len(snap.clusters)} cluster(s))")


def _with_checkpoints(snap: Any, tracking_uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    from gangway.lineage.checkpoints import last_checkpoints

    names = [g.workflow for c in snap.clusters.values() for g in c.gangs if g.workflow]
    try:
        marks = last_checkpoints(MlflowClient(tracking_uri=tracking_uri), names)
    except Exception as e:
        err_console.print(f"[yellow]no checkpoint times: {tracking_uri} did not answer: {e}[/]")
        return snap
    clusters = {
        n: c.model_copy(
            update={
                "gangs": [
                    g.model_copy(update={"last_checkpoint_at": marks[g.workflow]})
                    if g.workflow in marks
                    else g
                    for g in c.gangs
                ]
            }
        )
        for n, c in snap.clusters.items()
    }
    return snap.model_copy(update={"clusters": clusters})


@app.command("show")
def show_cmd(snapshot: SnapshotOpt = None) -> None:
    """Summarise a snapshot: clusters, GPU models, free GPUs, gangs."""
    from gangway.cli.decisions import render_snapshot

    console.print(render_snapshot(read_snapshot(snapshot)))


def queues_cmd(
    cluster: Annotated[str | None, typer.Option(help="only this cluster")] = None,
    snapshot: SnapshotOpt = None,
) -> None:
    """Each queue's usage against its guarantee, deserved share and capability (over a
    deserved share: yellow — reclaimable by other queues)."""
    from gangway.cli.decisions import render_queues

    snap = read_snapshot(snapshot, [cluster] if cluster and not snapshot else None)
    if cluster and cluster not in snap.clusters:
        known = ", ".join(sorted(snap.clusters))
        raise PermanentError(f"--cluster {cluster}: not in the snapshot ({known})")
    console.print(render_queues(snap, cluster))


def decide_pipeline(
    pipeline: Path,
    params: dict[str, str],
    snapshot: Any,
    *,
    gpu_type: str | None,
    within: str | None,
    data_region: str | None,
    cluster: str | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """The pipeline's manifest and a placement for each of its gangs."""
    from dataclasses import replace

    from gangway.cli.options import load_manifests
    from gangway.config import load_config
    from gangway.placement import place
    from gangway.workload import gang_workloads, region_of

    obj = load_manifests(pipeline)[0]
    region = data_region or region_of(params.values(), load_config().storage.buckets)
    gangs = gang_workloads(obj, params, data_region=region)
    if not gangs:
        raise PermanentError(f"{pipeline}: no gang step (Volcano Job) to place")
    if cluster and cluster not in snapshot.clusters:
        known = ", ".join(sorted(snapshot.clusters))
        raise PermanentError(f"--cluster {cluster}: not in the snapshot ({known})")
    placements = [
        place(
            replace(w, gpu_type=gpu_type or w.gpu_type, within=within or w.within),
            snapshot,
            cluster=cluster,
        )
        for w in gangs
    ]
    return obj, placements


def explain_cmd(
    pipeline: Annotated[Path, typer.Argument(help="a pipeline file (.py) or its YAML")],
    param: ParamOpt = None,
    snapshot: SnapshotOpt = None,
    cluster: Annotated[str | None, typer.Option(help="decide for this cluster only")] = None,
    gpu_type: GpuTypeOpt = None,
    within: WithinOpt = None,
    data_region: RegionOpt = None,
) -> None:
    """Print the admission and placement decision for each gang of a pipeline: admit now,
    admit by preempting (which gangs, what they lose), wait (for what exactly) or reject (which
    field to change) — per cluster, best first, with the reasons. Sends nothing."""
    from gangway.cli.decisions import render_placement
    from gangway.cli.options import parse_params

    snap = read_snapshot(snapshot)
    _, placements = decide_pipeline(
        pipeline,
        parse_params(param),
        snap,
        gpu_type=gpu_type,
        within=within,
        data_region=data_region,
        cluster=cluster,
    )
    for p in placements:
        console.print(render_placement(p))


def why_cmd(
    workflow: Annotated[str, typer.Argument(help="workflow name")],
    cluster: Annotated[
        str | None, typer.Option(help="the cluster it runs on (platform config)")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="default: the cluster's Argo namespace")
    ] = None,
    snapshot: SnapshotOpt = None,
) -> None:
    """Why a workflow's gang is pending: its PodGroup's conditions as Volcano wrote them, and
    Gangway's decision over a fresh snapshot of the cluster (what it waits for, what would be
    evicted) — on one screen."""
    from gangway.cli.decisions import render_why
    from gangway.cluster import resolve_cluster
    from gangway.snapshot.live import list_workflow_gangs
    from gangway.why import why_pending

    c = resolve_cluster(cluster)
    if not cluster and not snapshot:
        raise PermanentError(
            "why: pass --cluster NAME (a cluster of the platform config, whose snapshot is "
            "read live) or --snapshot FILE"
        )
    objs = list_workflow_gangs(c.kube_context, namespace or c.namespace, workflow)
    snap = read_snapshot(snapshot, [c.name] if cluster else None)
    if c.name not in snap.clusters:
        known = ", ".join(sorted(snap.clusters))
        raise PermanentError(f"--cluster {c.name}: not in the snapshot ({known})")
    target = c.name
    console.print(render_why(workflow, target, why_pending(workflow, objs, snap, cluster=target)))
