"""``gangway lineage``: walk the MLflow lineage graph, and ``gangway lineage sync``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from gangway.cli._output import console, err_console
from gangway.errors import PermanentError, TransientError

__all__ = ["lineage_cmd"]

REF_HELP = (
    "what to trace: model:NAME/VERSION, run:ID, workflow:NAME (or uid), dataset:DIGEST "
    "(a prefix will do) — or `sync` to send spooled records to MLflow"
)


def lineage_cmd(
    ref: Annotated[str, typer.Argument(help=REF_HELP, metavar="REF|sync")],
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            envvar="MLFLOW_TRACKING_URI",
            help="MLflow tracking server (http://...) or local store (sqlite:///...)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of trees")] = False,
    depth: Annotated[int, typer.Option(min=1, help="how many hops to follow each way")] = 12,
    spool: Annotated[
        list[str] | None,
        typer.Option(
            help="sync: a spool (…/runs/UID/lineage), a runs/ prefix or a storage root; repeatable"
        ),
    ] = None,
) -> None:
    """Show where a model, run, workflow or dataset came from and what came of it.

    Upstream: data → training → checkpoint → model version. Downstream: evaluations,
    registered versions, inference runs and their outputs. Reads the MLflow tracking store
    that steps record to (see docs/lineage.md).

    `gangway lineage sync --spool URI` replays lineage that steps spooled while MLflow was
    unreachable; it is idempotent, so running it twice adds nothing.
    """
    if not tracking_uri:
        raise PermanentError(
            "no tracking store: pass --tracking-uri (e.g. http://mlflow:5000 or "
            "sqlite:///.gangway/demo/mlflow.db) or set MLFLOW_TRACKING_URI"
        )
    if ref == "sync":
        _sync(tracking_uri, spool or [])
        return
    from mlflow.tracking import MlflowClient

    from gangway.lineage.graph import build_graph, walk
    from gangway.lineage.query import load_snapshot, resolve
    from gangway.lineage.render import text_lines, to_json

    try:
        snap = load_snapshot(MlflowClient(tracking_uri=tracking_uri))
    except Exception as e:
        raise TransientError(f"cannot read lineage from {tracking_uri}: {e}") from None
    graph, root = resolve(build_graph(snap), ref)
    up, down = walk(graph, root, "up", depth=depth), walk(graph, root, "down", depth=depth)
    if as_json:
        typer.echo(json.dumps(to_json(graph, root, up, down), indent=2, sort_keys=True))
        return
    for line in text_lines(graph, root, up, down):
        console.print(line, soft_wrap=True, highlight=False, markup=False)


def _sync(tracking_uri: str, spools: list[str]) -> None:
    from gangway.lineage import sync
    from gangway.lineage.spool import Spool, find_spools

    if not spools:
        raise PermanentError(
            "sync needs --spool URI: a workflow's spool ({storage-root}/runs/UID/lineage), "
            "or a storage root to sync every run under it"
        )
    roots = [s for given in spools for s in find_spools(given)]
    if not roots:
        raise PermanentError(f"no lineage records under {', '.join(spools)}")
    sent = left = 0
    for root in roots:
        report = sync(Spool(root), tracking_uri)
        sent += len(report.runs)
        left += len(report.pending)
        if report.error:
            err_console.print(f"[yellow]{root}: {report.error}[/]")
    console.print(f"sent {sent} record(s) from {len(roots)} spool(s); {left} still pending")
    if left:
        raise TransientError(f"{left} record(s) still pending; run `gangway lineage sync` again")
