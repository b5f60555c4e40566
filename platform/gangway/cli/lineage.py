"""``gangway lineage``: walk the MLflow lineage graph, and ``gangway lineage sync``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gangway.cli._output import console, err_console
from gangway.cli.options import interval_seconds
from gangway.errors import GangwayError, PermanentError, TransientError, describe
from gangway.lineage import store
from gangway.lineage.store import check, sqlite_uri

if TYPE_CHECKING:
    from gangway.cluster.exporter import Families
    from gangway.lineage.follow import FollowPass
    from gangway.step.metrics import MetricSpec

__all__ = ["lineage_cmd", "local_store"]

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
            help="sync: keep going, a pass every --interval, until stopped (SIGTERM, "
            "Ctrl-C); what runs in each team namespace on a cluster",
        ),
    ] = False,
    interval: Annotated[
        str,
        typer.Option(
            help="sync --follow: time between passes: 30s, 2m, … (a plain number: seconds)"
        ),
    ] = "30s",
    namespace: Annotated[
        str | None,
        typer.Option(help="sync: only the spools of workflows that ran in this namespace"),
    ] = None,
    other_store: Annotated[
        bool,
        typer.Option(
            "--other-store",
            help="sync: send spools into --tracking-uri even when they record another store",
        ),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="sync --follow: serve the follower's metrics (pending records, errors, last "
            "good pass) on http://0.0.0.0:PORT/metrics (0: any free port, printed)",
        ),
    ] = None,
) -> None:
    """Show where a model, run, workflow or dataset came from and what came of it.

    Upstream: data → training → checkpoint → model version. Downstream: evaluations,
    registered versions, inference runs and their outputs. Reads the MLflow tracking store
    that steps record to (see docs/lineage.md).

    `gangway lineage sync --spool URI` sends lineage that steps spooled (a pipeline's steps
    only spool; `gangway run` and the workflow's exit handler send it) to the MLflow store the
    spool records — another one only with --tracking-uri and --other-store; it is idempotent,
    so running it twice adds nothing. With --follow it keeps sending what new workflows spool.
    """
    if ref == "sync":
        target = _SyncTarget(tracking_uri, other_store)
        _sync_cmd(target, spool or [], follow, interval, namespace, metrics_port)
        return
    if follow or namespace or other_store or metrics_port is not None:
        raise PermanentError(
            "--follow, --namespace, --other-store and --metrics-port go with `gangway lineage sync`"
        )
    _trace(ref, tracking_uri, state_dir, as_json=as_json, depth=depth)


def _sync_cmd(
    target: _SyncTarget,
    spools: list[str],
    follow: bool,
    interval: str,
    namespace: str | None,
    metrics_port: int | None,
) -> None:
    """``lineage sync``: one pass, or with ``follow`` pass after pass."""
    if metrics_port is not None and not follow:
        raise PermanentError("--metrics-port goes with --follow")
    seconds = interval_seconds(interval, "passes", least=0.1)
    if target.uri is not None:
        check(target.uri, write=True)
    if follow:
        _follow(target, spools, seconds, namespace, metrics_port)
    else:
        _sync(target, spools, namespace)


def _trace(
    ref: str, tracking_uri: str | None, state_dir: Path, *, as_json: bool, depth: int
) -> None:
    """Walk the graph from ``ref`` both ways and print it (trees, or JSON)."""
    from gangway.lineage.query import parse_ref

    parse_ref(ref)  # a typo is reported before any store is looked for
    tracking_uri = tracking_uri or local_store(state_dir)
    check(tracking_uri, write=False)
    from gangway.lineage.graph import build_graph, walk
    from gangway.lineage.query import load_snapshot, resolve
    from gangway.lineage.render import text_lines, to_json

    client = open_to_read(tracking_uri, f"cannot open {tracking_uri}")
    try:
        snap = load_snapshot(client)
    except Exception as e:
        raise TransientError(f"cannot read lineage from {tracking_uri}: {e}") from None
    graph, root = resolve(build_graph(snap), ref)
    up, down = walk(graph, root, "up", depth=depth), walk(graph, root, "down", depth=depth)
    if as_json:
        typer.echo(json.dumps(to_json(graph, root, up, down), indent=2, sort_keys=True))
        return
    for line in text_lines(graph, root, up, down):
        console.print(line, soft_wrap=True, highlight=False, markup=False)


def open_to_read(uri: str, refused: str) -> Any:
    """An MLflow client over ``uri`` that never changes the store; MLflow refusing the URI
    itself is a :class:`PermanentError` starting ``refused``, with why."""
    try:
        return store.client(uri, write=False)
    except GangwayError:
        raise
    except Exception as e:  # MLflow refused the URI itself
        raise PermanentError(f"{refused}: {describe(e)}") from None


def local_store(state_dir: Path) -> str:
    """The MLflow store of the local runs in ``state_dir`` (``gangway run`` keeps one there):
    its own, or the newest one a level below (``.gangway/demo``)."""
    found = [state_dir / "mlflow.db", *state_dir.glob("*/mlflow.db")]
    found = [f for f in found if f.is_file()]
    runs = [
        d
        for d in [state_dir, *state_dir.glob("*")]
        if (d / "runs").is_dir() and (d / "storage").is_dir()  # a state dir, not its storage
    ]
    if not found and runs:
        spools = " ".join(f"--spool {d / 'storage'}" for d in runs)
        blocked = [str(d / "mlflow.db") for d in runs if (d / "mlflow.db").exists()]
        first = f"move {', '.join(blocked)} aside (not a file), then " if blocked else ""
        raise PermanentError(
            f"no MLflow store in {', '.join(str(d) for d in runs)}, though local runs are there "
            "(mlflow.db moved or deleted?); the runs' spools still hold their lineage: "
            f"{first}`gangway lineage sync {spools}` builds it again"
        )
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


def _need_spools(spools: list[str]) -> None:
    if not spools:
        raise PermanentError(
            "sync needs --spool URI: a workflow's spool ({storage-root}/runs/UID/lineage), "
            "or a storage root to sync every run under it"
        )


@dataclass(frozen=True)
class _SyncTarget:
    """Where `sync` sends: each spool's own store, or ``uri`` (another one with ``other``)."""

    uri: str | None
    other: bool

    def __str__(self) -> str:
        return self.uri or "each spool's own MLflow store"


def _sync(target: _SyncTarget, spools: list[str], namespace: str | None = None) -> None:
    """One pass; exit 1 when a record is unreadable or a spool cannot go where asked, 75 when
    records are left pending (the store did not take them: run it again once it works)."""
    from gangway.lineage.follow import follow_pass

    _need_spools(spools)
    done = follow_pass(
        spools, target.uri, namespace=namespace, done=set(), other_store=target.other
    )
    if not done.found:
        raise PermanentError(f"no lineage records under {', '.join(spools)}")
    sent, left, unreadable = done.sent, done.pending, done.unreadable
    for root, why in done.errors.items():
        err_console.print(f"[yellow]{root}: {why}[/]", highlight=False, soft_wrap=True)
    unsendable = f"; {len(unreadable)} unreadable, not sent" if unreadable else ""
    console.print(
        f"sent {sent} record(s) from {done.spools} spool(s); {left} still pending{unsendable}"
    )
    if unreadable:
        raise PermanentError(
            f"{len(unreadable)} spooled record(s) are unreadable and were not sent:\n"
            + "\n".join(f"  {uri}: {why}" for uri, why in sorted(unreadable.items()))
            + "\nfix or remove them; the others were sent"
        )
    if done.permanent:
        raise PermanentError(
            f"{len(done.permanent)} spool(s) cannot be sent until what is said above is fixed; "
            f"{left} record(s) stay spooled"
        )
    if left or done.errors:
        raise TransientError(
            f"{left} record(s) still pending (they stay spooled); run the same "
            "`gangway lineage sync` again once the store works"
        )


def _log(line: str, *, err: bool = False) -> None:
    """One daemon log line, never wrapped (a pod's log is read one line per event)."""
    out = err_console if err else console
    out.print(line, style="yellow" if err else None, markup=False, highlight=False, soft_wrap=True)


def _follow(
    target: _SyncTarget,
    spools: list[str],
    interval: float,
    namespace: str | None,
    metrics_port: int | None = None,
) -> None:
    """``sync --follow``: pass after pass until SIGTERM or Ctrl-C (then exit 0). A server or
    storage that is down is reported and tried again on the next pass. With ``metrics_port``,
    each pass's outcome is served (:func:`_follower_metrics`)."""
    import signal
    import threading

    from gangway.lineage.follow import follow

    _need_spools(spools)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda n, f: stop.set())
    where = ", ".join(spools) + (f" (namespace {namespace})" if namespace else "")
    _log(f"following {where} → {target}, a pass every {interval:g}s")
    publish = _follower_metrics(namespace, metrics_port) if metrics_port is not None else None
    follow(
        spools,
        target.uri,
        interval=interval,
        stop=stop,
        namespace=namespace,
        other_store=target.other,
        on_pass=_reporter(publish),
    )
    _log("stopped")


def _reporter(publish: Callable[[FollowPass], None] | None) -> Callable[[FollowPass], None]:
    """What each pass logs: what it sent, each error (one line each), an unreadable record
    and a missing spool root once (they stay so on every pass until fixed)."""
    import time

    from gangway.lineage.follow import PASS_ERROR

    told: set[str] = set()

    def report(p: FollowPass) -> None:
        if publish is not None:
            publish(p)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        for root in p.missing:
            if root not in told:
                told.add(root)
                _log(
                    f"{stamp} warning: spool root {root} does not exist: nothing to send from "
                    "it until it does (a typo? the storage not mounted?)",
                    err=True,
                )
        for uri, why in p.unreadable.items():
            if uri not in told:
                told.add(uri)
                _log(f"{stamp} unreadable, not sent: {uri}: {_one_line(why)}", err=True)
        if p.sent or p.pending:
            _log(f"{stamp} sent {p.sent} record(s) from {p.spools} spool(s); {p.pending} pending")
        for root, why in p.errors.items():
            where = "cannot list the spool roots" if root == PASS_ERROR else root
            _log(f"{stamp} {where}: {_one_line(why)}", err=True)

    return report


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class _FollowerState:
    """What the follower's metrics say: pending records as of the last pass that read its
    spool roots and that pass's Unix time (None before one), and passes with errors."""

    pending: int = 0
    last_ok: float | None = None
    errors: int = 0

    def after(self, p: FollowPass, now: float) -> _FollowerState:
        failed = self.errors + (1 if p.errors or p.missing else 0)
        if not p.read_roots:  # what it could not read is not 0 pending: keep the last known
            return _FollowerState(self.pending, self.last_ok, failed)
        return _FollowerState(p.pending, now, failed)


def _follower_metrics(namespace: str | None, port: int) -> Callable[[FollowPass], None]:
    """Serve the follower's health on ``port`` (all interfaces, as in a pod): the pending
    records, its errors and its last good pass, labelled ``namespace`` (none without one).
    Returns what takes each pass's outcome."""
    import dataclasses
    import time

    from gangway.cluster.exporter import Exporter, serve
    from gangway.scheduling.fleet_metrics import fleet_spec

    def spec(name: str) -> MetricSpec:
        found = fleet_spec(name)
        return found if namespace else dataclasses.replace(found, labels=())

    pending, last, errors = (
        spec(f"gangway_lineage_{n}")
        for n in ("spool_pending_records", "sync_last_pass_time_seconds", "sync_errors_total")
    )
    key = (namespace,) if namespace else ()
    state = [_FollowerState()]

    def own(_reading: None, _health: object) -> Families:
        s = state[0]  # pending and the last pass: absent until a pass read the spool roots
        read = [] if s.last_ok is None else [(key, float(s.pending))]
        return [
            (pending, read),
            (last, [] if s.last_ok is None else [(key, s.last_ok)]),
            (errors, [(key, float(s.errors))]),
        ]

    # no reading of its own: each scrape serves the state the last pass left
    exporter: Exporter[None] = Exporter(lambda: None, lambda _r, _b: [], own)
    try:
        bound, _server = serve(exporter, port, "0.0.0.0")
    except OSError as e:
        raise PermanentError(f"--metrics-port {port}: cannot listen ({e.strerror or e})") from None
    _log(f"metrics: http://0.0.0.0:{bound}/metrics")

    def publish(p: FollowPass) -> None:
        state[0] = state[0].after(p, time.time())

    return publish
