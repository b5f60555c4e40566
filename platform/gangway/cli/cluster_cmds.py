"""``gangway submit``, ``deploy``, ``status`` and ``logs``: plan → (dry run | apply) → render."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.table import Table
from rich.text import Text

from gangway.cli._lookups import CheckLinksOpt, PinOpt, link_mlflow, mlflow_url, pinned_image
from gangway.cli._output import console, err_console
from gangway.cli.options import (
    NameOpt,
    Output,
    OutputOpt,
    load_manifests,
    parse_params,
    submission_of,
)
from gangway.cli.scheduling import GpuTypeOpt, RegionOpt, SnapshotOpt, WithinOpt
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.cluster.settings import ClusterConfig
    from gangway.cluster.submission import HeraArgoApi
    from gangway.workflows.manifest_files import Submission

__all__ = ["deploy_cmd", "links_cmd", "logs_cmd", "status_cmd", "submit_cmd"]

ClusterOpt = Annotated[
    str | None, typer.Option(help="cluster name from GANGWAY_CONFIG (default: ARGO_* env)")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="print the objects, send nothing")]
NamespaceOpt = Annotated[str | None, typer.Option(help="defaults to the cluster's")]
ManifestArg = Annotated[Path, typer.Argument(help="a pipeline file (.py) or YAML manifests")]


def _team_namespace(obj: dict[str, Any], fallback: str) -> str:
    from gangway.cluster.submission import team_namespace
    from gangway.config import load_config

    return team_namespace(obj, load_config(), fallback)


def _lint_or_fail(
    objs: list[dict[str, Any]],
    values: dict[str, str] | None = None,
    start: dict[str, Any] | None = None,
) -> None:
    """Lint every object, and the values supplied for ``start`` (default: the first), before
    anything is sent."""
    from gangway.lint import CrdSchemas, lint_manifest
    from gangway.lint.values import refuse_bad_values

    schemas = CrdSchemas.from_env()
    if schemas is None:
        err_console.print(
            "[yellow]CRD schema checks skipped: set GANGWAY_CRDS_DIR to check against the CRDs "
            "too[/]"
        )
    errors = [f for o in objs for f in lint_manifest(o, schemas) if f.severity == "error"]
    if errors:
        for f in errors:
            console.print(f"[red]{f}[/]", soft_wrap=True)
        raise PermanentError(f"{len(errors)} lint error(s); fix them or see `gangway lint`")
    if values and objs:
        refuse_bad_values(start or objs[0], values, schemas)


def _print_objects(objs: list[dict[str, Any]]) -> None:
    typer.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


def _provenance(
    pipeline: Path, obj: dict[str, Any], params: dict[str, str], cluster: str
) -> dict[str, str]:
    from gangway.config import load_config
    from gangway.workflows.provenance import submit_provenance

    return submit_provenance(pipeline, obj, params, cluster=cluster, config=load_config())


def _dry_params(
    pipeline: Path, obj: dict[str, Any], params: dict[str, str], cluster: str | None
) -> dict[str, str]:
    return {**params, **_provenance(pipeline, obj, params, cluster or "env")}


def _connect(cluster: str | None) -> tuple[ClusterConfig, HeraArgoApi]:
    """The cluster's settings and an Argo API client for it."""
    from gangway.cluster.settings import resolve_cluster
    from gangway.cluster.submission import HeraArgoApi

    c = resolve_cluster(cluster)
    return c, HeraArgoApi(c.base_url, c.token, c.verify_ssl)


def _auto_cluster(
    pipeline: Path, obj: dict[str, Any], params: dict[str, str], auto: AutoOptions
) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """``--cluster auto``: the cluster for the pipeline's gangs
    (:func:`gangway.scheduling.pipeline_placement.choose_cluster`), the pipeline with their
    placement written on, and the decisions as records (``--output json``); the decision goes
    to stderr as tables unless JSON is asked for. A rejection sends nothing."""
    from gangway.cli.decisions import placement_record, render_placement, render_source
    from gangway.cli.scheduling import decide_pipeline, read_snapshot
    from gangway.config import load_config
    from gangway.scheduling.pipeline_placement import choose_cluster, placed_manifest

    snap = read_snapshot(auto.snapshot)
    placements = decide_pipeline(
        obj,
        str(pipeline),
        params,
        snap,
        gpu_type=auto.gpu_type,
        within=auto.within,
        data_region=auto.data_region,
    )
    tables = not auto.json
    if tables:
        err_console.print(render_source(snap))
        for p in placements:
            err_console.print(render_placement(p))
    choice = choose_cluster(placements, snap, set(load_config().clusters))
    if choice.replaced and tables:
        err_console.print(
            Text(f"all gangs go to {choice.cluster}, where every one of them can run:")
        )
        for p in choice.placements:
            err_console.print(render_placement(p))
    if tables:
        err_console.print(f"--cluster auto: {choice.cluster}")
    records = [placement_record(p, snap) for p in choice.placements]
    return choice.cluster, placed_manifest(obj, choice.placements), records


def submit_cmd(
    pipeline: ManifestArg,
    param: Annotated[list[str] | None, typer.Option("-p", "--param", help="name=value")] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="cluster name from GANGWAY_CONFIG (default: ARGO_* env), or 'auto': the best "
            "cluster for the pipeline's gangs (see `gangway explain`)"
        ),
    ] = None,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = False,
    snapshot: SnapshotOpt = None,
    gpu_type: GpuTypeOpt = None,
    within: WithinOpt = None,
    data_region: RegionOpt = None,
    pin_image: PinOpt = None,
    check_links: CheckLinksOpt = False,
    name: NameOpt = None,
    output: OutputOpt = Output.TABLE,
) -> None:
    """Lint, create-or-update the WorkflowTemplate, and start a Workflow from it.

    From a YAML file: a WorkflowTemplate (with the CronWorkflows that run it, which `gangway
    deploy` sends), a Workflow (sent as it is, as `argo submit` sends one) or a CronWorkflow
    (one run of its workflow now); the file's WorkflowTemplates it references are created or
    updated first. --name chooses when the file holds several.

    The `image` parameter (-p image=, else the pipeline's default) is pinned by digest: the
    registry is asked for the tag's digest, and the workflow runs (and its lineage records)
    NAME:TAG@sha256:…; --no-pin-image sends the tag.

    --dry-run prints the exact objects and makes no network call unless asked: the image
    goes by its tag (--pin-image pins it) and the MLflow link is left out (--check-links).

    With --cluster auto, Gangway first decides where the gangs go (admission and placement
    over a snapshot of the clusters), prints the decision with the alternatives, writes the
    chosen topology onto the gang's Volcano Job, and submits to that cluster.

    --output json prints one JSON document on stdout instead: with --dry-run, the objects
    (and, with --cluster auto, the cluster and each gang's decision: verdict, victims with
    their rules, nodes per pod, the Job's topology, reasons); after a submit, the workflow's
    name, namespace and link."""
    as_json = output == Output.JSON
    objs = load_manifests(pipeline)
    sub = submission_of(pipeline, objs, name)
    params = parse_params(param)
    decision: dict[str, Any] | None = None
    if cluster is not None and cluster.lower() == "auto":
        auto = AutoOptions(snapshot, gpu_type, within, data_region, json=as_json)
        cluster, objs, sub, records = _placed(pipeline, sub, params, auto)
        decision = {"cluster": cluster, "gangs": records}
    elif snapshot or gpu_type or within or data_region:
        raise PermanentError(
            "--snapshot, --gpu-type, --within and --data-region go with --cluster auto"
        )
    _lint_or_fail(objs, params, sub.resolved)
    if dry_run:
        objects = _dry_run(
            pipeline, sub, params, cluster, namespace, pin=bool(pin_image), ask=check_links
        )
        if as_json:
            typer.echo(json.dumps({"placement": decision, "objects": objects}, indent=2))
        else:
            _print_objects(objects)
    elif check_links:
        raise PermanentError("--check-links goes with --dry-run (a submit always links)")
    else:
        pin = pin_image is not False
        sent = _submit(pipeline, sub, params, cluster, namespace, pin=pin, to_stderr=as_json)
        if as_json:
            typer.echo(json.dumps({"placement": decision, **sent}, indent=2))


@dataclass(frozen=True)
class AutoOptions:
    """What ``--cluster auto`` decides over: the snapshot, and the gangs' GPU model, topology
    tier and data region when given."""

    snapshot: str | None
    gpu_type: str | None
    within: str | None
    data_region: str | None
    json: bool = False
    """The decision goes into the JSON document, not to stderr as tables."""


def _placed(
    pipeline: Path, sub: Submission, params: dict[str, str], auto: AutoOptions
) -> tuple[str, list[dict[str, Any]], Submission, list[dict[str, Any]]]:
    """``--cluster auto``: the cluster, and the object placed for it — sent whole, the
    placement written on the gangs wherever the file defines them."""
    from gangway.workflows.manifest_files import Submission

    if "cluster" in params:
        raise PermanentError(
            "-p cluster= and --cluster auto: let auto choose, or name the cluster with "
            "--cluster NAME"
        )
    cluster, placed, records = _auto_cluster(pipeline, sub.resolved, params, auto)
    return cluster, [placed], Submission(placed, [], placed), records


def _dry_run(
    pipeline: Path,
    sub: Submission,
    params: dict[str, str],
    cluster: str | None,
    namespace: str | None,
    *,
    pin: bool,
    ask: bool,
) -> list[dict[str, Any]]:
    """The exact objects a submit would send; no network call unless asked."""
    from gangway.cluster.submission import submit_plan

    params.update(pinned_image(sub.resolved, params, pin=pin, dry_run=True))
    plan = submit_plan(
        sub.start,
        _dry_params(pipeline, sub.resolved, params, cluster),
        namespace or _team_namespace(sub.start, "argo"),
        templates=sub.templates,
        declared=sub.resolved,
    )
    plan = link_mlflow(plan, mlflow_url(cluster), create=False, ask=ask)
    return [*plan.upserts, *([plan.run] if plan.run else [])]


def _submit(
    pipeline: Path,
    sub: Submission,
    params: dict[str, str],
    cluster: str | None,
    namespace: str | None,
    *,
    pin: bool,
    to_stderr: bool = False,
) -> dict[str, str]:
    """Send the plan to the cluster's Argo server; print what was done and the new workflow's
    link (``to_stderr``: when stdout is for JSON); return its name, namespace and link."""
    from gangway.cluster.submission import apply_plan, submit_plan

    c, api = _connect(cluster)
    params.update(pinned_image(sub.resolved, params, pin=pin, dry_run=False))
    params.update(_provenance(pipeline, sub.resolved, params, c.name))
    plan = submit_plan(
        sub.start,
        params,
        namespace or _team_namespace(sub.start, c.namespace),
        templates=sub.templates,
        declared=sub.resolved,
    )
    plan = link_mlflow(plan, c.mlflow_url, create=True)
    done, created = apply_plan(plan, api)
    out = err_console if to_stderr else console
    for line in done:
        out.print(line)
    name = (created or {}).get("metadata", {}).get("name", "?")
    url = c.workflow_url(name, plan.namespace)
    out.print(f"submitted workflow {name}\n{url}", soft_wrap=True)
    return {"workflow": name, "namespace": plan.namespace, "url": url}


def deploy_cmd(
    pipeline: ManifestArg,
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = False,
    check_links: CheckLinksOpt = False,
) -> None:
    """Create-or-update WorkflowTemplates and CronWorkflows (running it twice changes nothing).

    --dry-run prints the exact objects and makes no network call unless asked (--check-links
    asks MLflow for the experiment of the Argo UI link)."""
    from gangway.cluster.submission import deploy_plan

    objs = load_manifests(pipeline)
    _lint_or_fail(objs)
    if dry_run:
        plan = link_mlflow(
            deploy_plan(objs, namespace or _team_namespace(objs[0], "argo")),
            mlflow_url(cluster),
            create=False,
            ask=check_links,
        )
        _print_objects(plan.upserts)
        return
    from gangway.cluster.submission import apply_plan

    if check_links:
        raise PermanentError("--check-links goes with --dry-run (a deploy always links)")
    c, api = _connect(cluster)
    ns = namespace or _team_namespace(objs[0], c.namespace)
    plan = link_mlflow(deploy_plan(objs, ns), c.mlflow_url, create=True)
    done, _ = apply_plan(plan, api)
    for line in done:
        console.print(line)


def render_status(wf: dict[str, Any], progress: Mapping[str, str] | None = None) -> Table:
    """The workflow's steps; a running step's ``progress`` (by template) in its last column."""
    from gangway.cluster.status import summarize

    state = summarize(wf)
    secs = f" in {state.seconds:.0f}s" if state.seconds is not None else ""
    table = Table(title=f"{state.namespace}/{state.name}: {state.phase}{secs}", header_style="bold")
    for col in ("step", "template", "phase", "attempts", "seconds", "outputs / message"):
        table.add_column(col, overflow="fold")
    for s in state.steps:
        detail = ", ".join(f"{k}={v}" for k, v in s.outputs.items()) or s.message
        if s.phase == "Running" and (progress or {}).get(s.template):
            detail = (progress or {})[s.template]
        table.add_row(
            s.name,
            s.template,
            s.phase,
            str(s.attempts),
            "" if s.seconds is None else f"{s.seconds:.0f}",
            detail,
        )
    return table


def status_cmd(
    workflow: Annotated[str, typer.Argument(help="workflow name")],
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw Workflow")] = False,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            help="the Prometheus scraping the cluster's Gangway pods, for a running training "
            "step's progress and ETA (default: the cluster's prometheus_url, or "
            "GANGWAY_PROMETHEUS_URL)",
        ),
    ] = None,
) -> None:
    """Steps, phases, durations, retries and the gang's Volcano Job state of a workflow; a
    running training step's step / total, tokens/s, ETA and last checkpoint when Prometheus
    is configured."""
    c, api = _connect(cluster)
    ns = namespace or c.namespace
    wf = api.get("Workflow", workflow, ns)
    if wf is None:
        raise PermanentError(f"workflow {workflow} not found in namespace {ns}")
    if as_json:
        typer.echo(json.dumps(wf, indent=2))
        return
    console.print(render_status(wf, _progress(prometheus or c.prometheus_url, workflow)))
    console.print(c.workflow_url(workflow, ns), soft_wrap=True)


def _progress(url: str | None, workflow: str) -> dict[str, str]:
    """Each step's progress line from Prometheus; none (said on stderr) when it cannot be
    reached — the status itself does not depend on it."""
    if not url:
        return {}
    import time

    from gangway.cluster.prometheus import workflow_progress
    from gangway.errors import GangwayError

    try:
        found = workflow_progress(url, workflow)
    except GangwayError as e:
        err_console.print(f"warning: no progress: {e}", soft_wrap=True, highlight=False)
        return {}
    now = time.time()
    return {step: p.line(now) for step, p in found.items()}


def logs_cmd(
    workflow: Annotated[str, typer.Argument(help="workflow name")],
    step: Annotated[str | None, typer.Option(help="only this step (template name)")] = None,
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Logs of a workflow's pods, the gang's pods included (they carry the workflow label)."""
    from gangway.cluster.logs import read_logs
    from gangway.cluster.settings import resolve_cluster

    c = resolve_cluster(cluster)
    for pod, text in read_logs(workflow, namespace or c.namespace, c.kube_context, step):
        console.rule(pod)
        typer.echo(text, nl=False)


def links_cmd(
    mlflow_url: Annotated[
        str, typer.Option(help="the MLflow server as users open it, e.g. https://mlflow.lab")
    ],
    namespace: Annotated[str, typer.Option(help="Argo's namespace")] = "argo",
) -> None:
    """Print the Argo workflow-controller ConfigMap that links each workflow to its MLflow runs.

    Save it as manifests/argo/workflow-controller-configmap.yaml (or merge its `links` into
    your own ConfigMap). Workflows get the experiment annotation the links read from
    `gangway submit` / `gangway deploy` (set GANGWAY_MLFLOW_URL or mlflow_url: per cluster).
    """
    from gangway.lineage.links import configmap_yaml

    typer.echo(configmap_yaml(mlflow_url, namespace), nl=False)
