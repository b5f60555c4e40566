"""``gangway compile`` and ``gangway run``: a pipeline file to YAML, and run here."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from gangway.cli._output import console
from gangway.errors import PermanentError

__all__ = ["compile_cmd", "run_cmd"]

PipelineArg = Annotated[Path, typer.Argument(help="a pipeline file, e.g. pipelines/x.py")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("-p", "--param", help="override a workflow parameter: -p name=value"),
]


def compile_cmd(
    pipeline: PipelineArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="write here")] = None,
) -> None:
    """Compile PIPELINE to the Argo manifest (YAML) that `gangway submit` would send."""
    from gangway.compiler import compile_pipeline, to_yaml

    text = to_yaml(compile_pipeline(pipeline))
    if output:
        output.write_text(text)
        console.print(f"wrote {output}")
    else:
        typer.echo(text, nl=False)


def _params(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise PermanentError(f"-p {item!r}: expected name=value, e.g. -p train-steps=100")
        out[k] = v
    return out


_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Error": "red",
    "Running": "yellow",
    "Skipped": "dim",
    "Omitted": "dim",
}


def _table(nodes: Sequence[object], title: str) -> Table:
    from gangway.local import NodeResult

    table = Table(title=title, header_style="bold")
    for col in ("step", "status", "attempts", "seconds", "outputs / message"):
        table.add_column(col, overflow="fold")
    for n in nodes:
        assert isinstance(n, NodeResult)
        style = _STYLE.get(n.phase, "")
        detail = ", ".join(f"{k}={_short(v)}" for k, v in n.outputs.items()) or n.message
        table.add_row(
            n.name,
            f"[{style}]{n.phase}[/]",
            str(n.attempts or ""),
            f"{n.seconds:.1f}" if n.seconds else "",
            detail,
        )
    return table


def _short(v: str, n: int = 60) -> str:
    v = v.strip()
    return v if len(v) <= n else v[: n - 1] + "…"


def run_cmd(
    pipeline: PipelineArg,
    param: ParamOpt = None,
    state_dir: Annotated[Path, typer.Option(help="local state: storage, logs")] = Path(".gangway"),
    parallelism: Annotated[
        int, typer.Option(min=1, help="fanned-out steps run side by side, at most this many")
    ] = 1,
) -> None:
    """Compile PIPELINE and execute the compiled workflow on this machine.

    Runs the DAG of the very manifest Argo would receive: each step's container command in a
    subprocess, the Volcano Job step as one torchrun per pod on 127.0.0.1, retries by the
    compiled retryStrategy. Storage defaults to file:// under --state-dir.
    """
    from gangway.compiler import compile_pipeline, declared_parameters
    from gangway.local import LocalExecutor, NodeResult, workflow_from_template
    from gangway.pipeline import LINEAGE_SPOOL
    from gangway.provenance import provenance_params

    overrides = _params(param)
    root = state_dir.resolve()
    manifest = compile_pipeline(pipeline)
    params = declared_parameters(manifest)
    if "storage-root" in params:
        overrides.setdefault("storage-root", f"file://{root}/storage")
    if "mlflow-tracking-uri" in params:
        overrides.setdefault("mlflow-tracking-uri", f"sqlite:///{root}/mlflow.db")
    overrides.update(provenance_params(pipeline, params, overrides, cluster="local"))
    workflow = workflow_from_template(manifest, overrides)
    # Steps import the pipeline's own module (Hera runner scripts do), as the image would.
    from gangway.compiler import import_root

    root_dir = str(import_root(pipeline))
    pythonpath = os.pathsep.join(p for p in (root_dir, os.environ.get("PYTHONPATH")) if p)
    executor = LocalExecutor(
        workflow, root, parallelism=parallelism, env={"PYTHONPATH": pythonpath}
    )
    done: list[NodeResult] = []
    running: dict[str, NodeResult] = {}
    t0 = time.monotonic()

    def view() -> Table:
        title = f"{executor.name}  ({time.monotonic() - t0:.0f}s)"
        return _table([*done, *running.values()], title)

    with Live(view(), console=console, refresh_per_second=4, transient=True) as live:

        def event(node: NodeResult) -> None:
            if node.phase in ("Running", "Pending"):
                running[node.name] = node
            else:
                running.pop(node.name, None)
                done.append(node)
            live.update(view())

        executor.on_event = event
        result = executor.run()
    console.print(_table(result.nodes, f"{result.name}: {result.phase} in {result.seconds:.0f}s"))
    storage_root = result.parameters.get("storage-root", "")
    where = [f"run:     {storage_root}/runs/{result.uid}", f"logs:    {result.state_dir}/logs"]
    tracking = result.parameters.get("mlflow-tracking-uri", "")
    if tracking:
        from gangway.local._subst import substitute
        from gangway.tracking import finish_workflow

        labels = workflow["metadata"].get("labels", {})
        pipeline_name = labels.get("gangway.dev/pipeline", "adhoc")
        scope = {"workflow.parameters.storage-root": storage_root, "workflow.uid": result.uid}
        spool = substitute(LINEAGE_SPOOL, scope, where="the lineage spool")
        parent = finish_workflow(tracking, pipeline_name, result.uid, result.phase, spool)
        where.append(f"mlflow:  experiment {pipeline_name!r}, workflow run {parent}")
        if tracking.startswith(("http://", "https://")):
            from gangway.links import experiment_id, workflow_runs_url

            exp = experiment_id(tracking, pipeline_name, create=False)
            if exp:
                where.append(f"         {workflow_runs_url(tracking, exp, result.uid)}")
        if tracking.startswith("sqlite:"):
            where.append(f"         mlflow ui --backend-store-uri {tracking}")
        where.append(f"lineage: gangway lineage workflow:{result.name} --tracking-uri {tracking}")
    where.append(f"params:  {json.dumps(result.parameters)}")
    for line in where:
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    if result.phase != "Succeeded":
        bad = next((n for n in result.nodes if n.phase in ("Failed", "Error")), None)
        if bad is not None:
            console.print(f"[red]{bad.name} {bad.phase.lower()}: {bad.message}[/]  log: {bad.log}")
        raise typer.Exit(1)
