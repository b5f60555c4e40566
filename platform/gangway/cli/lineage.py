"""``gangway lineage``: walk the MLflow lineage graph, and ``gangway lineage sync``."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated

import typer

from gangway.cli._output import console, err_console
from gangway.errors import NotFoundError, PermanentError, TransientError
from gangway.lineage import sqlite_path, sqlite_uri

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
    state_dir: Annotated[
        Path,
        typer.Option(help="without --tracking-uri: use the MLflow store of local runs here"),
    ] = Path(".gangway"),
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="sync: keep going, a pass every --interval seconds, until stopped (SIGTERM, "
            "Ctrl-C); what runs in each team namespace on a cluster",
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option(min=0.1, help="sync --follow: seconds between passes")
    ] = 30.0,
    namespace: Annotated[
        str | None,
        typer.Option(help="sync: only the spools of workflows that ran in this namespace"),
    ] = None,
) -> None:
    """Show where a model, run, workflow or dataset came from and what came of it.

    Upstream: data → training → checkpoint → model version. Downstream: evaluations,
    registered versions, inference runs and their outputs. Reads the MLflow tracking store
    that steps record to (see docs/lineage.md).

    `gangway lineage sync --spool URI` sends lineage that steps spooled (a pipeline's steps
    only spool; `gangway run` and the workflow's exit handler send it); it is idempotent, so
    running it twice adds nothing. With --follow it keeps sending what new workflows spool.
    """
    if ref != "sync":
        from gangway.lineage.query import parse_ref

        parse_ref(ref)  # a typo is reported before any store is looked for
        if follow or namespace:
            raise PermanentError("--follow and --namespace go with `gangway lineage sync`")
    tracking_uri = tracking_uri or _local_store(state_dir)
    if ref == "sync" and follow:
        _follow(tracking_uri, spool or [], interval, namespace)
        return
    check_reachable(tracking_uri, create=ref == "sync")
    if ref == "sync":
        _sync(tracking_uri, spool or [], namespace)
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


def _local_store(state_dir: Path) -> str:
    """The MLflow store of the local runs in ``state_dir`` (``gangway run`` keeps one there):
    its own, or the newest one a level below (``.gangway/demo``)."""
    found = [state_dir / "mlflow.db", *state_dir.glob("*/mlflow.db")]
    found = [f for f in found if f.is_file()]
    if not found:
        raise PermanentError(
            f"no tracking store: none in {state_dir} (no local run there), no --tracking-uri "
            "and no MLFLOW_TRACKING_URI; pass --tracking-uri (http://mlflow:5000 or "
            "sqlite:///PATH/mlflow.db) or --state-dir of a local run"
        )
    newest = max(found, key=lambda f: f.stat().st_mtime)
    uri = sqlite_uri(newest.resolve())
    err_console.print(f"using the local MLflow store {uri}", highlight=False, soft_wrap=True)
    return uri


def check_reachable(uri: str, *, create: bool = False, timeout: float = 5.0) -> None:
    """Fail in seconds, with what to do, when the store is not there: an http(s) server that
    does not answer, or (unless ``create``) a sqlite file that does not exist — reading must
    not create an empty store."""
    import os
    import urllib.error
    import urllib.request

    path = sqlite_path(uri)
    if path is not None:
        if not create and not path.is_file():
            raise NotFoundError(f"{uri}: no MLflow store there (no such file); check the path")
        if path.is_file() and not _is_mlflow_db(path):
            raise PermanentError(
                f"{uri}: {path} is not an MLflow store (no MLflow tables); check the path — "
                "Gangway does not add tables to another database"
            )
        return
    if not uri.startswith(("http://", "https://")):
        return
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout):
            return
    except urllib.error.HTTPError as e:
        if e.code == 404:  # an MLflow server serves /health: this is something else
            raise PermanentError(
                f"{uri} is not an MLflow tracking server (it answered /health with 404); "
                "check --tracking-uri or MLFLOW_TRACKING_URI"
            ) from None
        return  # it answered (an auth proxy, say); MLflow will say more
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise TransientError(
            f"cannot reach MLflow at {uri} ({reason}); is the server running? "
            "Check --tracking-uri or MLFLOW_TRACKING_URI"
        ) from None


def _is_mlflow_db(path: Path) -> bool:
    """Read-only look at a sqlite file: does it hold MLflow's tables?"""
    import sqlite3

    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            names = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    except sqlite3.Error:
        return False
    return {"alembic_version", "runs", "experiments"} <= names


def _need_spools(spools: list[str]) -> None:
    if not spools:
        raise PermanentError(
            "sync needs --spool URI: a workflow's spool ({storage-root}/runs/UID/lineage), "
            "or a storage root to sync every run under it"
        )


def _sync(tracking_uri: str, spools: list[str], namespace: str | None = None) -> None:
    from gangway.lineage.follow import follow_pass

    _need_spools(spools)
    done = follow_pass(spools, tracking_uri, namespace=namespace, done=set())
    if not done.found:
        raise PermanentError(f"no lineage records under {', '.join(spools)}")
    sent, left, unreadable = done.sent, done.pending, done.unreadable
    for root, why in done.errors.items():
        err_console.print(f"[yellow]{root}: {why}[/]", highlight=False)
    console.print(f"sent {sent} record(s) from {done.spools} spool(s); {left} still pending")
    if unreadable:
        raise PermanentError(
            f"{len(unreadable)} spooled record(s) are unreadable and were not sent:\n"
            + "\n".join(f"  {uri}: {why}" for uri, why in sorted(unreadable.items()))
            + "\nfix or remove them; the others were sent"
        )
    if left:
        raise TransientError(f"{left} record(s) still pending; run `gangway lineage sync` again")


def _follow(tracking_uri: str, spools: list[str], interval: float, namespace: str | None) -> None:
    """``sync --follow``: pass after pass until SIGTERM or Ctrl-C (then exit 0). A server or
    storage that is down is reported and tried again on the next pass."""
    import signal
    import threading
    import time

    from gangway.lineage.follow import FollowPass, follow

    _need_spools(spools)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda n, f: stop.set())
    where = ", ".join(spools) + (f" (namespace {namespace})" if namespace else "")
    console.print(
        f"following {where} → {tracking_uri}, a pass every {interval:g}s", highlight=False
    )

    told: set[str] = set()

    def report(p: FollowPass) -> None:
        stamp = time.strftime("%H:%M:%S")
        for uri, why in p.unreadable.items():
            if uri not in told:  # once: it is skipped on every pass until fixed or removed
                told.add(uri)
                err_console.print(f"[yellow]{stamp} unreadable, not sent: {uri}: {why}[/]")
        if p.sent or p.pending:
            console.print(
                f"{stamp} sent {p.sent} record(s) from {p.spools} spool(s); {p.pending} pending",
                highlight=False,
            )
        for root, why in p.errors.items():
            err_console.print(f"[yellow]{stamp} {root}: {why}[/]", highlight=False)

    follow(spools, tracking_uri, interval=interval, stop=stop, namespace=namespace, on_pass=report)
    console.print("stopped", highlight=False)
