"""``gangway submit``, ``deploy``, ``status`` and ``logs``: plan → (dry run | apply) → render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from gangway.cli._output import console
from gangway.errors import PermanentError

__all__ = ["deploy_cmd", "logs_cmd", "status_cmd", "submit_cmd"]

ClusterOpt = Annotated[
    str | None, typer.Option(help="cluster name from GANGWAY_CONFIG (default: ARGO_* env)")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="print the objects, send nothing")]
NamespaceOpt = Annotated[str | None, typer.Option(help="defaults to the cluster's")]
ManifestArg = Annotated[Path, typer.Argument(help="a pipeline file (.py) or YAML manifests")]


def _manifests(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".py":
        from gangway.compiler import compile_pipeline

        return [compile_pipeline(path)]
    if not path.is_file():
        raise PermanentError(f"{path}: no such file")
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _lint_or_fail(objs: list[dict[str, Any]]) -> None:
    import os

    from gangway.lint import CrdSchemas, lint_manifest

    if not os.environ.get("GANGWAY_CRDS_DIR"):
        console.print(
            "[yellow]lint skipped: set GANGWAY_CRDS_DIR to check against the CRDs first[/]"
        )
        return
    schemas = CrdSchemas.from_dir(Path(os.environ["GANGWAY_CRDS_DIR"]))
    errors = [f for o in objs for f in lint_manifest(o, schemas) if f.severity == "error"]
    if errors:
        for f in errors:
            console.print(f"[red]{f}[/]", soft_wrap=True)
        raise PermanentError(f"{len(errors)} lint error(s); fix them or see `gangway lint`")


def _print_objects(objs: list[dict[str, Any]]) -> None:
    typer.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


def _connect(cluster: str | None) -> tuple[Any, Any]:
    """The cluster's settings and an Argo API client for it."""
    from gangway.cluster import resolve_cluster
    from gangway.submission import HeraArgoApi

    c = resolve_cluster(cluster)
    return c, HeraArgoApi(c.base_url, c.token, c.verify_ssl)


def submit_cmd(
    pipeline: ManifestArg,
    param: Annotated[list[str] | None, typer.Option("-p", "--param", help="name=value")] = None,
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Lint, create-or-update the WorkflowTemplate, and start a Workflow from it."""
    from gangway.cli.pipelines import _params
    from gangway.submission import submit_plan

    objs = _manifests(pipeline)
    _lint_or_fail(objs)
    if dry_run:
        plan = submit_plan(objs[0], _params(param), namespace or "argo")
        _print_objects([*plan.upserts, *([plan.run] if plan.run else [])])
        return
    from gangway.submission import apply_plan

    c, api = _connect(cluster)
    plan = submit_plan(objs[0], _params(param), namespace or c.namespace)
    done, created = apply_plan(plan, api)
    for line in done:
        console.print(line)
    name = (created or {}).get("metadata", {}).get("name", "?")
    console.print(
        f"submitted workflow {name}\n{c.workflow_url(name, plan.namespace)}", soft_wrap=True
    )


def deploy_cmd(
    pipeline: ManifestArg,
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Create-or-update WorkflowTemplates and CronWorkflows (running it twice changes nothing)."""
    from gangway.submission import deploy_plan

    objs = _manifests(pipeline)
    _lint_or_fail(objs)
    if dry_run:
        _print_objects(deploy_plan(objs, namespace or "argo").upserts)
        return
    from gangway.submission import apply_plan

    c, api = _connect(cluster)
    done, _ = apply_plan(deploy_plan(objs, namespace or c.namespace), api)
    for line in done:
        console.print(line)


def render_status(wf: dict[str, Any]) -> Table:
    from gangway.status import summarize

    state = summarize(wf)
    secs = f" in {state.seconds:.0f}s" if state.seconds is not None else ""
    table = Table(title=f"{state.namespace}/{state.name}: {state.phase}{secs}", header_style="bold")
    for col in ("step", "template", "phase", "attempts", "seconds", "outputs / message"):
        table.add_column(col, overflow="fold")
    for s in state.steps:
        detail = ", ".join(f"{k}={v}" for k, v in s.outputs.items()) or s.message
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
) -> None:
    """Steps, phases, durations, retries and the gang's Volcano Job state of a workflow."""
    c, api = _connect(cluster)
    ns = namespace or c.namespace
    wf = api.get("Workflow", workflow, ns)
    if wf is None:
        raise PermanentError(f"workflow {workflow} not found in namespace {ns}")
    if as_json:
        typer.echo(json.dumps(wf, indent=2))
        return
    console.print(render_status(wf))
    console.print(c.workflow_url(workflow, ns), soft_wrap=True)


def logs_cmd(
    workflow: Annotated[str, typer.Argument(help="workflow name")],
    step: Annotated[str | None, typer.Option(help="only this step (template name)")] = None,
    cluster: ClusterOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Logs of a workflow's pods, the gang's pods included (they carry the workflow label)."""
    from gangway.cluster import resolve_cluster
    from gangway.pods import read_logs

    c = resolve_cluster(cluster)
    for pod, text in read_logs(workflow, namespace or c.namespace, c.kube_context, step):
        console.rule(pod)
        typer.echo(text, nl=False)
