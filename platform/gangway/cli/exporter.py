"""``gangway exporter``: the fleet as Prometheus metrics — queues, pending gangs and why,
capacity and fragmentation, GPU-seconds per team, checkpoint ages — from a snapshot read every
interval (:mod:`gangway.scheduling.fleet_samples` decides, :mod:`gangway.cluster.exporter`
reads and serves)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gangway.cli._output import console
from gangway.cli.options import interval_seconds
from gangway.cli.scheduling import read_snapshot
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.cluster.exporter import Exporter, Families, Health
    from gangway.scheduling.snapshot.cluster_state import Snapshot

__all__ = ["exporter_cmd"]


def _check(cluster: str | None, snapshot: str | None, port: int) -> None:
    if cluster is None and snapshot is None:
        raise PermanentError(
            "exporter: give --cluster NAME (a cluster of the platform config, read live) or "
            "--snapshot FILE|example"
        )
    if not 0 <= port <= 65535:
        raise PermanentError(f"--port {port}: give a TCP port, 1 to 65535 (0: any free one)")
    if snapshot is None and cluster is not None:
        from gangway.config import load_config

        cfg = load_config()
        if cluster not in cfg.clusters:
            known = ", ".join(sorted(cfg.clusters))
            raise PermanentError(f"--cluster {cluster}: not in the platform config ({known})")


def _exporter(
    cluster: str | None, snapshot: str | None, tracking_uri: str | None
) -> Exporter[Snapshot]:
    from gangway.cluster.exporter import Exporter
    from gangway.scheduling.fleet_samples import exporter_families, fleet_families
    from gangway.scheduling.pipeline_placement import not_in_snapshot

    only = [cluster] if cluster else None

    def read() -> Snapshot:
        snap: Snapshot = read_snapshot(snapshot, only) if snapshot else _live(str(cluster))
        if cluster and cluster not in snap.clusters:
            raise not_in_snapshot(cluster, snap)
        if tracking_uri:
            from gangway.cli.scheduling import lineage_checkpoints

            snap = lineage_checkpoints(snap, tracking_uri)
        return snap

    def decide(snap: Snapshot, before: Snapshot | None) -> Families:
        previous = before.taken_at if before is not None else None
        return fleet_families(snap, previous=previous, clusters=only)

    def own(snap: Snapshot | None, h: Health) -> Families:
        # before a file has named its clusters, the error counter is served as cluster=""
        names = only or (list(snap.clusters) if snap is not None else [""])
        return exporter_families(names, errors=h.errors, last_ok=h.last_ok, duration=h.duration)

    return Exporter(read, decide, own)


def _live(cluster: str) -> Snapshot:
    """``cluster`` read live. A cluster that cannot be read is this reading's error, as one
    line: transient (exit 75 with ``--once``) when its API server does not answer."""
    from gangway.config import load_config
    from gangway.errors import GangwayError
    from gangway.scheduling.snapshot.live import list_objects, live_snapshot

    failed: list[GangwayError] = []

    def lister(context: str | None) -> list[dict[str, Any]]:
        try:
            return list_objects(context)
        except GangwayError as e:
            failed.append(e)
            raise

    def warn(message: str) -> None:
        if not failed:  # "left out of the snapshot" is the reading's error, said once below
            print(f"warning: {message}", file=sys.stderr, flush=True)

    try:
        return live_snapshot(load_config(), clusters=[cluster], lister=lister, warn=warn)
    except PermanentError:
        if failed:
            raise type(failed[0])(f"cluster {cluster}: {failed[0]}") from None
        raise


def exporter_cmd(
    cluster: Annotated[
        str | None,
        typer.Option(help="a cluster of the platform config, read live through its kube context"),
    ] = None,
    snapshot: Annotated[
        str | None,
        typer.Option(
            help="a snapshot file, read again at every interval, or 'example' (the shipped "
            "one); with --cluster, only that cluster of it"
        ),
    ] = None,
    interval: Annotated[str, typer.Option(help="time between snapshots: 30s, 2m, …")] = "30s",
    port: Annotated[int, typer.Option(help="port of /metrics (0: any free one, printed)")] = 9401,
    host: Annotated[
        str, typer.Option(help="address to listen on (0.0.0.0: every interface)")
    ] = "127.0.0.1",
    once: Annotated[
        bool, typer.Option("--once", help="print the metrics of one snapshot and exit")
    ] = False,
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow, for each running gang's last checkpoint (its age metric)"),
    ] = None,
) -> None:
    """Serve the fleet as Prometheus metrics on /metrics, from a snapshot every --interval.

    Per queue and GPU model: GPUs held against guarantee, deserved share and capability;
    pending gangs by why they wait (quota, domain, preemption, never_fits, fits_now — the
    decision `gangway why` shows) and the oldest one's age. Per cluster and model:
    allocatable, allocated, free and fragmented GPUs. GPU-seconds per team, and each running
    gang's last-checkpoint age. A snapshot that cannot be read is counted
    (gangway_exporter_snapshot_errors_total) and logged; the last good values stay served.
    `gangway exporter --snapshot example --once` prints them once."""
    seconds = interval_seconds(interval, "snapshots")
    _check(cluster, snapshot, port)
    if once:
        _once(cluster, snapshot, tracking_uri)
        return
    _serve(_exporter(cluster, snapshot, tracking_uri), seconds, port, host, interval)


def _once(cluster: str | None, snapshot: str | None, tracking_uri: str | None) -> None:
    from gangway.cluster.exporter import exposition

    exporter = _exporter(cluster, snapshot, tracking_uri)
    exporter.refresh(strict=True)  # a snapshot that cannot be read is this command's error
    typer.echo(exposition(exporter), nl=False)


def _serve(exporter: Any, seconds: float, port: int, host: str, interval: str) -> None:
    import signal
    import threading

    from gangway.cluster.exporter import run, serve

    try:
        bound, server = serve(exporter, port, host)
    except OSError as e:
        raise PermanentError(
            f"--port {port}: cannot listen on {host}:{port} ({e.strerror or e}); pick another "
            "port, or 0 for any free one"
        ) from None
    stop = threading.Event()
    stops = (signal.SIGTERM, signal.SIGINT)
    before = {sig: signal.signal(sig, lambda n, f: stop.set()) for sig in stops}
    console.print(
        f"metrics: http://{host}:{bound}/metrics (a snapshot every {interval})",
        highlight=False,
        soft_wrap=True,
    )
    try:
        run(exporter, seconds, stop)
    finally:
        server.shutdown()
        for sig, handler in before.items():
            signal.signal(sig, handler)
    console.print("stopped", highlight=False)
