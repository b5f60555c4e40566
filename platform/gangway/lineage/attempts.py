"""What one step attempt held, and when: the facts usage accounting needs, recorded as MLflow tags
on the attempt's run (``gangway.team``, ``gangway.devices``…) beside its start and end times.

A step's tracker writes them when it opens (:func:`attempt_tags`) and when its processes all
run (:data:`RUNNING_MS`); :class:`Attempt` reads them back from a run. The devices of an attempt
are its GPUs — pods × GPUs per pod — or, without GPUs, its processes (a CPU gang's ranks), so
"GPU-hours" on this machine are CPU-process-hours. Pure: no MLflow import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from gangway.contract import (
    ENV_GPU_MODEL,
    ENV_GPUS,
    ENV_PIPELINE,
    ENV_QUEUE,
    ENV_SUBMITTED_MS,
    ENV_TEAM,
    tag,
)

__all__ = [
    "DEVICE",
    "DEVICES",
    "GPU_MODEL",
    "PIPELINE",
    "PODS",
    "QUEUE",
    "RUNNING_MS",
    "SUBMITTED_MS",
    "TEAM",
    "Attempt",
    "Held",
    "attempt_tags",
    "held",
]

PIPELINE = tag("pipeline")
TEAM = tag("team")
QUEUE = tag("queue")
DEVICE = tag("device")
"""``gpu`` or ``cpu``."""
DEVICES = tag("devices")
PODS = tag("pods")
GPU_MODEL = tag("gpu_model")
SUBMITTED_MS = tag("submitted_ms")
"""When the attempt was submitted (Unix ms; the start when unknown)."""
RUNNING_MS = tag("running_ms")
"""When all its processes ran (a gang: its rendezvous completed; Unix ms)."""


@dataclass(frozen=True)
class Held:
    """The devices an attempt holds: ``devices`` of kind ``device`` over ``pods`` pods."""

    device: str
    devices: int
    pods: int
    gpu_model: str


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


def held(env: Mapping[str, str] | None = None) -> Held:
    """What this process's attempt holds, from the pod's environment: ``GANGWAY_GPUS`` per pod,
    and under torchrun ``WORLD_SIZE`` ranks over ``WORLD_SIZE / LOCAL_WORLD_SIZE`` pods."""
    env = os.environ if env is None else env
    world = _whole(env, "WORLD_SIZE", 1)
    pods = max(1, world // _whole(env, "LOCAL_WORLD_SIZE", 1))
    gpus = _whole(env, ENV_GPUS, 0)
    if gpus:
        return Held("gpu", gpus * pods, pods, env.get(ENV_GPU_MODEL, ""))
    return Held("cpu", world, pods, "")


def attempt_tags(env: Mapping[str, str], start_ms: int) -> dict[str, str]:
    """The tags an attempt starting at ``start_ms`` records about itself."""
    h = held(env)
    submitted = env.get(ENV_SUBMITTED_MS, "").strip()
    return {
        PIPELINE: env.get(ENV_PIPELINE, "") or "adhoc",
        TEAM: env.get(ENV_TEAM, ""),
        QUEUE: env.get(ENV_QUEUE, ""),
        DEVICE: h.device,
        DEVICES: str(h.devices),
        PODS: str(h.pods),
        GPU_MODEL: h.gpu_model,
        SUBMITTED_MS: submitted if submitted.isdigit() else str(start_ms),
    }


@dataclass(frozen=True)
class Attempt:
    """One step attempt as usage reads it back from its MLflow run."""

    pipeline: str
    workflow: str
    step: str
    team: str
    queue: str
    device: str
    devices: int
    gpu_model: str
    status: str
    submitted_ms: int
    start_ms: int
    running_ms: int
    end_ms: int | None
    """None while it runs."""

    @classmethod
    def from_run(
        cls, tags: Mapping[str, str], start_ms: int, end_ms: int | None, status: str
    ) -> Attempt:
        """From a step run's tags and times (a run recorded before these tags existed reads
        as one CPU device, submitted and running at its start)."""

        def ms(name: str) -> int:
            text = tags.get(name, "")
            return int(text) if text.isdigit() else start_ms

        return cls(
            pipeline=tags.get(PIPELINE, ""),
            workflow=tags.get(tag("workflow"), ""),
            step=tags.get(tag("step"), ""),
            team=tags.get(TEAM, ""),
            queue=tags.get(QUEUE, ""),
            device=tags.get(DEVICE, "cpu") or "cpu",
            devices=_whole(tags, DEVICES, 1),
            gpu_model=tags.get(GPU_MODEL, ""),
            status=status,
            submitted_ms=ms(SUBMITTED_MS),
            start_ms=start_ms,
            running_ms=ms(RUNNING_MS),
            end_ms=end_ms,
        )

    def device_seconds(self, now_ms: int) -> float:
        """Devices × (end − start), a running attempt up to ``now_ms``: what
        ``gangway_device_seconds_total`` adds up for it."""
        end = self.end_ms if self.end_ms is not None else now_ms
        return self.devices * max(0, end - self.start_ms) / 1000

    @property
    def queue_wait_s(self) -> float:
        """Submitted → all its processes running."""
        return max(0, self.running_ms - self.submitted_ms) / 1000
