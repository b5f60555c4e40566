"""Prometheus metrics from step code: one naming scheme, bounded labels, samples that outlive a
killed process, and the ``/metrics`` endpoint that serves them.

Every metric Gangway's steps emit is declared once, in :data:`METRICS` (name, type, labels,
meaning, who emits it); ``docs/observability.md`` is its table, checked against it by a test.
Names are ``gangway_…`` in base units (seconds, ratios 0–1), counters end in ``_total``. Labels
are bounded: ``team``, ``queue``, ``pipeline``, ``workflow``, ``step`` (from the step
environment of :mod:`gangway.contract`) and, for per-rank series, ``rank`` — never free text.

How samples travel: a step process writes them with prometheus-client's multiprocess mode to
files under ``GANGWAY_METRICS_DIR`` (memory-mapped, so a SIGKILLed rank's last values stay), and
one server per place reads the whole directory:

* ``gangway run`` sets the directory for the whole run and, with ``--metrics-port``, serves it
  on 127.0.0.1 (:func:`serve`);
* on a cluster a pod's entry point serves it on ``GANGWAY_METRICS_PORT`` (the container port
  named ``metrics``, which the rendered PodMonitor scrapes): the gang launcher for its ranks,
  :func:`gangway.step.main_wrapper` for a container step (:func:`serve_pod`).

With neither variable set a step records nothing and never imports prometheus-client.
Gauges keep the value written last by any process (``mostrecent``), so a resumed rank's step
replaces the killed one's; counters and histograms add up over processes.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from gangway.contract import (
    ENV_METRICS_DIR,
    ENV_METRICS_PORT,
    ENV_PIPELINE,
    ENV_QUEUE,
    ENV_STEP,
    ENV_TEAM,
    WORKFLOW_IDENTITY_ENV,
)

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "METRICS",
    "RANKED",
    "STEP_LABELS",
    "MetricSpec",
    "RunCollector",
    "StepMetrics",
    "collect",
    "serve",
    "serve_pod",
    "spec",
]

Kind = Literal["counter", "gauge", "histogram"]

STEP_LABELS = ("team", "queue", "pipeline", "workflow", "step")
"""The labels of every series: whose run it is and which step of it."""
RANKED = (*STEP_LABELS, "rank")
"""The labels of a per-rank series."""

_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its name (with ``_total`` for a counter), type, labels, what it means and
    who emits it."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    meaning: str
    emitted_by: str
    buckets: tuple[float, ...] = ()
    mode: Literal["mostrecent", "livesum"] = "mostrecent"
    """A gauge's multiprocess mode: the value written last by any process (``mostrecent``), or
    the sum over the processes alive (``livesum``: a fanned-out step's pods together)."""


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "gangway_step_start_time_seconds",
        "gauge",
        STEP_LABELS,
        "Unix time the step's latest attempt started",
        "every step",
    ),
    MetricSpec(
        "gangway_step_end_time_seconds",
        "gauge",
        STEP_LABELS,
        "Unix time the step's latest attempt ended (absent while its first attempt runs; older "
        "than the start while a later one runs)",
        "every step",
    ),
    MetricSpec(
        "gangway_step_attempts_total",
        "counter",
        STEP_LABELS,
        "attempts of the step started: the first, retries and gang restarts (a fanned-out "
        "step: each pod's)",
        "every step",
    ),
    MetricSpec(
        "gangway_device_seconds_total",
        "counter",
        (*STEP_LABELS, "device"),
        "device-seconds the step held: its GPUs (device=gpu) or, without GPUs, its processes "
        "(device=cpu), from the start to the end of each attempt; ÷ 3600 for GPU-hours",
        "every step (a gang: its rank 0, for all its pods), every 15 s and at the end",
    ),
    MetricSpec(
        "gangway_train_step",
        "gauge",
        RANKED,
        "optimizer steps completed",
        "training, every rank",
    ),
    MetricSpec(
        "gangway_train_target_steps",
        "gauge",
        STEP_LABELS,
        "optimizer steps the run trains to",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_tokens_per_second",
        "gauge",
        STEP_LABELS,
        "tokens per second of the whole gang over the last log window (checkpoint time left out)",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_mfu_ratio",
        "gauge",
        STEP_LABELS,
        "model FLOPs utilisation over the last log window, 0–1 (GPUs only: absent on CPUs)",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_loss",
        "gauge",
        STEP_LABELS,
        "training loss, the mean over ranks of the last log window",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_step_duration_seconds",
        "histogram",
        STEP_LABELS,
        "seconds per optimizer step, one observation per log window (its mean)",
        "training, rank 0",
        _SECONDS,
    ),
    MetricSpec(
        "gangway_train_last_step_time_seconds",
        "gauge",
        STEP_LABELS,
        "Unix time of the last optimizer step: a stalled gang stops moving it",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_step_seconds",
        "gauge",
        STEP_LABELS,
        "seconds per optimizer step over the last log window (the recent step time alerts "
        "compare a stall with)",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_eta_seconds",
        "gauge",
        STEP_LABELS,
        "seconds left to the target step at the last log window's rate, checkpoints included",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_train_resumes_total",
        "counter",
        STEP_LABELS,
        "times training started again from a checkpoint (after a preemption, a kill or a retry)",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_checkpoint_last_complete_time_seconds",
        "gauge",
        STEP_LABELS,
        "Unix time the newest complete checkpoint was committed",
        "training, rank 0",
    ),
    MetricSpec(
        "gangway_checkpoint_save_duration_seconds",
        "histogram",
        STEP_LABELS,
        "seconds to save and commit one checkpoint",
        "training, rank 0",
        _SECONDS,
    ),
    MetricSpec(
        "gangway_items_processed_total",
        "counter",
        STEP_LABELS,
        "items done: checkpoints scored (evaluation), documents through a pass (inference)",
        "evaluation, inference",
    ),
    MetricSpec(
        "gangway_items_planned_total",
        "counter",
        STEP_LABELS,
        "items the step's attempts set out to do, added up over its fanned-out pods",
        "evaluation, inference",
    ),
    MetricSpec(
        "gangway_items_per_second",
        "gauge",
        STEP_LABELS,
        "items per second of the step's running pods together, each since it started its items",
        "evaluation, inference",
        mode="livesum",
    ),
)


def spec(name: str) -> MetricSpec:
    """The declared metric ``name``; a KeyError names the known ones."""
    for m in METRICS:
        if m.name == name:
            return m
    raise KeyError(f"no metric {name!r}; declared: {', '.join(m.name for m in METRICS)}")


def _labels_from(env: Mapping[str, str], step: str | None) -> dict[str, str]:
    return {
        "team": env.get(ENV_TEAM, ""),
        "queue": env.get(ENV_QUEUE, ""),
        "pipeline": env.get(ENV_PIPELINE, "") or "adhoc",
        "workflow": env.get(WORKFLOW_IDENTITY_ENV["name"], ""),
        "step": step or env.get(ENV_STEP, "") or "step",
    }


class _Registry:
    """The process's metric objects, made once, written to ``GANGWAY_METRICS_DIR``."""

    _lock = threading.Lock()
    _made: ClassVar[dict[str, Any]] = {}

    @classmethod
    def metric(cls, name: str, directory: str) -> Any:
        with cls._lock:
            if not cls._made:
                cls._start(directory)
            if name not in cls._made:
                cls._made[name] = cls._make(spec(name))
            return cls._made[name]

    @staticmethod
    def _start(directory: str) -> None:
        """Point prometheus-client at ``directory`` (its multiprocess mode reads the variable
        when it is imported; the value class is set again in case it was imported before)."""
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        Path(directory).mkdir(parents=True, exist_ok=True)
        from prometheus_client import values

        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]

    @staticmethod
    def _make(m: MetricSpec) -> Any:
        import prometheus_client as pc

        base = m.name.removesuffix("_total") if m.kind == "counter" else m.name
        common: dict[str, Any] = {"labelnames": m.labels, "registry": None}
        if m.kind == "counter":
            return pc.Counter(base, m.meaning, **common)
        if m.kind == "gauge":
            return pc.Gauge(base, m.meaning, multiprocess_mode=m.mode, **common)
        return pc.Histogram(base, m.meaning, buckets=m.buckets, **common)


class StepMetrics:
    """One step process's metrics: a no-op when ``GANGWAY_METRICS_DIR`` is unset.

    ``rank`` fills the ``rank`` label of per-rank series. Writing a sample costs a few
    microseconds (a memory-mapped file); nothing is sent anywhere from the step.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, *, step: str | None = None, rank: int = 0
    ) -> None:
        env = os.environ if env is None else env
        self.dir = env.get(ENV_METRICS_DIR, "")
        self.on = bool(self.dir)
        self.labels = _labels_from(env, step)
        self.rank = rank
        self._clock: _DeviceClock | None = None
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        self._items_t0, self._items_done = time.monotonic(), 0.0

    def _series(self, name: str, extra: Mapping[str, str]) -> Any:
        key = (name, tuple(sorted(extra.items())))
        child = self._children.get(key)
        if child is None:
            m = spec(name)
            labels = {**self.labels, "rank": str(self.rank), **extra}
            child = _Registry.metric(name, self.dir).labels(*(labels[k] for k in m.labels))
            self._children[key] = child
        return child

    def set(self, name: str, value: float, **extra: str) -> None:
        if self.on:
            self._series(name, extra).set(value)

    def inc(self, name: str, amount: float = 1.0, **extra: str) -> None:
        if self.on and amount > 0:
            self._series(name, extra).inc(amount)

    def observe(self, name: str, value: float, **extra: str) -> None:
        if self.on:
            self._series(name, extra).observe(value)

    # ---- items: evaluation and inference ---------------------------------------------------

    def items_start(self, target: float) -> None:
        """The attempt will do ``target`` items; its rate counts from now."""
        self._items_t0, self._items_done = time.monotonic(), 0.0
        self.inc("gangway_items_planned_total", target)

    def items_done(self, n: float = 1.0) -> None:
        """``n`` more items done (after :meth:`items_start`)."""
        self._items_done += n
        self.inc("gangway_items_processed_total", n)
        elapsed = time.monotonic() - self._items_t0
        if elapsed > 0:
            self.set("gangway_items_per_second", self._items_done / elapsed)

    # ---- an attempt's start, end and the devices it holds ----------------------------------

    def started(self, at: float, devices: int, device: str) -> None:
        """The attempt started at Unix time ``at`` holding ``devices`` of kind ``device``:
        its start, one more attempt, and device-seconds counted from ``at`` every
        ``_DeviceClock.EVERY`` seconds until :meth:`ended`."""
        if not self.on:
            return
        self.set("gangway_step_start_time_seconds", at)
        self.inc("gangway_step_attempts_total")
        self._clock = _DeviceClock(self, at, devices, device)
        self._clock.start()

    def ended(self, at: float) -> None:
        """The attempt ended at Unix time ``at``: its end, and its device-seconds up to it."""
        if not self.on:
            return
        if self._clock is not None:
            self._clock.stop(at)
            self._clock = None
        self.set("gangway_step_end_time_seconds", at)


class _DeviceClock(threading.Thread):
    """Adds ``devices`` × elapsed seconds to ``gangway_device_seconds_total`` every ``EVERY``
    seconds, and the rest at :meth:`stop`: the total is exactly devices × (end − start), the
    same sum lineage records; a killed process loses at most ``EVERY`` seconds of it."""

    EVERY = 15.0

    def __init__(self, metrics: StepMetrics, at: float, devices: int, device: str) -> None:
        super().__init__(daemon=True, name="gangway-device-seconds")
        self.metrics, self.devices, self.device = metrics, devices, device
        self.counted = at
        self.lock = threading.Lock()
        self.done = threading.Event()

    def _count(self, until: float) -> None:
        with self.lock:
            if until > self.counted:
                amount = self.devices * (until - self.counted)
                self.metrics.inc("gangway_device_seconds_total", amount, device=self.device)
                self.counted = until

    def run(self) -> None:
        while not self.done.wait(self.EVERY):
            self._count(time.time())

    def stop(self, at: float) -> None:
        self.done.set()
        self._count(at)


# ---- serving ---------------------------------------------------------------------------------


def collect(directory: Path) -> CollectorRegistry:
    """A registry that reads every process's samples under ``directory`` when scraped."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(RunCollector(directory))
    return registry


class RunCollector:
    """Every process's samples under ``directory``, read at each scrape; before the directory
    is known (``None``: ``gangway run`` binds its port before the run is compiled) or while it
    is empty, none."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def collect(self) -> Any:
        d = self.directory
        if d is None or not d.is_dir() or not any(d.glob("*.db")):
            return []
        from prometheus_client.multiprocess import MultiProcessCollector

        reader = MultiProcessCollector(None, path=str(d))  # type: ignore[no-untyped-call]
        return reader.collect()  # type: ignore[no-untyped-call]


def serve(
    directory: Path | None, port: int = 0, host: str = "127.0.0.1"
) -> tuple[int, Any, RunCollector]:
    """Serve ``directory``'s samples on ``http://HOST:PORT/metrics`` from a daemon thread
    (``port`` 0: any free one). Returns the port, the server (``.shutdown()`` stops it) and
    the collector (set its ``directory`` later, when it was None)."""
    from prometheus_client import CollectorRegistry, start_http_server

    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    collector = RunCollector(directory)
    registry = CollectorRegistry()
    registry.register(collector)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return int(server.server_address[1]), server, collector


def serve_pod(env: Mapping[str, str] | None = None) -> Path | None:
    """On a cluster (``GANGWAY_METRICS_PORT`` set, ``GANGWAY_METRICS_DIR`` not): make this
    pod's samples directory, point this process and its children at it and serve it on all
    interfaces. Returns the directory (None when there is nothing to serve: locally ``gangway
    run`` serves the run's). A port that cannot be bound is said on stderr, never fatal."""
    env = os.environ if env is None else env
    port = env.get(ENV_METRICS_PORT, "")
    if not port or env.get(ENV_METRICS_DIR):
        return None
    directory = Path(tempfile.mkdtemp(prefix="gangway-metrics-"))
    os.environ[ENV_METRICS_DIR] = str(directory)
    try:
        serve(directory, int(port), host="0.0.0.0")
    except (OSError, ValueError) as e:
        import sys

        print(f"warning: metrics not served on port {port}: {e}", file=sys.stderr)
    return directory
