"""The platform exporter's loop and its ``/metrics`` server (the thin I/O of ``gangway
exporter``): read a snapshot every interval, decide over it, and serve what was decided last.

The loop knows nothing of snapshots or decisions: it is given ``read`` (the snapshot reader),
``decide`` (the pure function from a reading and the one before it to metric families —
:func:`gangway.scheduling.fleet_samples.fleet_families`) and ``own`` (its health as families).
A counter family's samples from ``decide`` are increments; the loop adds them up. A reading
that fails — the file is invalid, the API server does not answer — counts one error, logs one
line and leaves the last good families served: the exporter never stops for it.

Scrapes are answered by a prometheus-client collector that yields the latest families (no
global gauges), so a scrape never waits on a snapshot being read.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gangway.errors import describe
from gangway.step.metrics import MetricSpec

__all__ = ["Exporter", "Families", "Health", "exposition", "run", "serve"]

T = TypeVar("T")
Families = Sequence[tuple[MetricSpec, Sequence[tuple[tuple[str, ...], float]]]]
"""Each metric with its samples: label values (in the metric's label order) and the value."""


@dataclass(frozen=True)
class Health:
    """What the loop counted: readings that failed, the Unix time of the last good one and
    the seconds it took to read and decide (None before the first)."""

    errors: int = 0
    last_ok: float | None = None
    duration: float | None = None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Exporter(Generic[T]):
    """The latest families: :meth:`refresh` reads and decides once; :meth:`collect` is what
    a scrape gets (prometheus-client's collector protocol)."""

    def __init__(
        self,
        read: Callable[[], T],
        decide: Callable[[T, T | None], Families],
        own: Callable[[T | None, Health], Families],
        *,
        log: Callable[[str], None] = _stderr,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._read, self._decide, self._own = read, decide, own
        self._log, self._clock, self._now = log, clock, now
        self._lock = threading.Lock()
        self._last: T | None = None
        self._fleet: list[tuple[MetricSpec, list[tuple[tuple[str, ...], float]]]] = []
        self._totals: dict[str, dict[tuple[str, ...], float]] = {}
        self.health = Health()

    def refresh(self, *, strict: bool = False) -> bool:
        """Read and decide once; False (an error counted and logged, the last good families
        kept) when either fails — ``strict``: the error is raised instead."""
        start = self._clock()
        try:
            reading = self._read()
            families = self._decide(reading, self._last)
        except Exception as e:  # whatever a reading throws: never the end of the exporter
            if strict:
                raise
            with self._lock:
                h = self.health
                self.health = Health(h.errors + 1, h.last_ok, h.duration)
            why = "; ".join(line.strip() for line in describe(e).splitlines() if line.strip())
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            kept = (
                "serving the last good values"
                if self._last is not None
                else "no good snapshot yet: only the exporter's own metrics are served"
            )
            self._log(f"{stamp} snapshot not read ({why}); {kept}")
            return False
        with self._lock:
            self._fleet = [(spec, self._add_up(spec, samples)) for spec, samples in families]
            self._last = reading
            self.health = Health(self.health.errors, self._now(), self._clock() - start)
        return True

    def _add_up(
        self, spec: MetricSpec, samples: Sequence[tuple[tuple[str, ...], float]]
    ) -> list[tuple[tuple[str, ...], float]]:
        """A gauge's samples as they are; a counter's increments added to its totals."""
        if spec.kind != "counter":
            return list(samples)
        totals = self._totals.setdefault(spec.name, {})
        for labels, value in samples:
            totals[labels] = totals.get(labels, 0.0) + value
        return sorted(totals.items())

    def families(self) -> list[tuple[MetricSpec, Sequence[tuple[tuple[str, ...], float]]]]:
        """What a scrape gets now: the last good families and the exporter's health."""
        with self._lock:
            fleet, last, health = list(self._fleet), self._last, self.health
        return [*fleet, *self._own(last, health)]

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for spec, samples in self.families():
            kind = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
            family = kind(spec.name, spec.meaning, labels=spec.labels)
            for labels, value in samples:
                family.add_metric(list(labels), value)
            yield family


def _registry(exporter: Exporter[Any]) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(exporter)
    return registry


def exposition(exporter: Exporter[Any]) -> str:
    """What ``/metrics`` answers now, as Prometheus's text format."""
    from prometheus_client import generate_latest

    return generate_latest(_registry(exporter)).decode()


def serve(exporter: Exporter[Any], port: int, host: str) -> tuple[int, Any]:
    """Serve ``exporter`` on ``http://HOST:PORT/metrics`` from a daemon thread (``port`` 0:
    any free one). Returns the port and the server (``.shutdown()`` stops it); a port that
    cannot be bound raises OSError."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host, registry=_registry(exporter))
    return int(server.server_address[1]), server


def run(exporter: Exporter[Any], interval: float, stop: threading.Event) -> None:
    """Refresh every ``interval`` seconds (the first at once) until ``stop`` is set."""
    while not stop.is_set():
        exporter.refresh()
        stop.wait(interval)
