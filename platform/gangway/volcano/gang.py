"""Reading a Volcano Job: its gang (tasks, pods, lifecycle policies, ``maxRetry``, the pytorch
plugin), the whole-gang rule, and the Job as the API returns it once it has a status."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.volcano.job import (
    ABORT_JOB,
    ABORTED,
    COMPLETE_JOB,
    COMPLETED,
    DEFAULT_MAX_RETRY,
    FAILED,
    JOB_API_VERSION,
    JOB_KIND,
    TERMINATED,
)

__all__ = [
    "Gang",
    "GangTask",
    "Policy",
    "end_phase",
    "gang_problems",
    "is_job",
    "job_object",
    "pod_specs",
    "pytorch_env",
    "read_gang",
    "size_lines",
]


def is_job(obj: Any) -> bool:
    """Whether ``obj`` is a Volcano Job manifest."""
    return (
        isinstance(obj, Mapping)
        and obj.get("apiVersion") == JOB_API_VERSION
        and obj.get("kind") == JOB_KIND
    )


@dataclass(frozen=True)
class Policy:
    """A lifecycle policy: on ``event`` or ``exit_code``, take ``action``."""

    action: str
    event: str | None = None
    exit_code: int | None = None


def _policies(raw: Any) -> tuple[Policy, ...]:
    return tuple(
        Policy(
            str(p.get("action")),
            p.get("event"),
            int(p["exitCode"]) if p.get("exitCode") is not None else None,
        )
        for p in raw or []
    )


@dataclass(frozen=True)
class GangTask:
    """One task of a Job: ``replicas`` pods from one pod template."""

    name: str
    replicas: int
    pod: Mapping[str, Any]
    """The pod template's spec."""
    policies: tuple[Policy, ...]

    @property
    def containers(self) -> list[Mapping[str, Any]]:
        return list(self.pod.get("containers") or [])

    def on_completed(self) -> str | None:
        """The action once every pod of the task has succeeded (``TaskCompleted``)."""
        return next((p.action for p in self.policies if p.event == "TaskCompleted"), None)


@dataclass(frozen=True)
class Gang:
    """A Job's gang as the scheduler and the controller see it."""

    tasks: tuple[GangTask, ...]
    policies: tuple[Policy, ...]
    max_retry: int
    pytorch: tuple[str, ...] | None
    """The pytorch plugin's arguments; None without the plugin (no MASTER_ADDR/RANK env)."""

    @property
    def gave_up(self) -> str:
        """Why the controller stopped restarting the gang."""
        return f"gave up after maxRetry={self.max_retry} restarts"

    @property
    def pods(self) -> int:
        return sum(t.replicas for t in self.tasks)

    def ranked(self) -> list[GangTask]:
        """The tasks in rank order: the pytorch plugin's master task first (rank 0)."""
        master = next(
            (a.split("=", 1)[1] for a in self.pytorch or () if a.startswith("--master=")),
            "master",
        )
        return sorted(self.tasks, key=lambda t: t.name != master)

    def on_failure(self, task: GangTask, exit_code: int) -> str | None:
        """The action when a pod of ``task`` exits ``exit_code`` != 0: an ``exitCode`` policy
        first (the task's, then the job's), then a ``PodFailed`` (or ``*``) one."""
        policies = (*task.policies, *self.policies)
        for p in policies:
            if p.exit_code == exit_code:
                return p.action
        return next((p.action for p in policies if p.event in ("PodFailed", "*")), None)


def read_gang(job: Mapping[str, Any]) -> Gang:
    """The gang of a filled Job manifest (counts must be whole numbers by now)."""
    spec = job.get("spec") or {}
    plugin = (spec.get("plugins") or {}).get("pytorch")
    return Gang(
        tasks=tuple(
            GangTask(
                name=str(t.get("name", "")),
                replicas=int(t.get("replicas", 0)),
                pod=(t.get("template") or {}).get("spec") or {},
                policies=_policies(t.get("policies")),
            )
            for t in spec.get("tasks") or []
        ),
        policies=_policies(spec.get("policies")),
        max_retry=int(spec.get("maxRetry", DEFAULT_MAX_RETRY)),
        pytorch=None if plugin is None else tuple(str(a) for a in plugin),
    )


def pytorch_env(*, master_port: int, world_size: int, rank: int) -> dict[str, str]:
    """What the pytorch plugin injects into each pod (here, all on one host)."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(world_size),
        "RANK": str(rank),
    }


def end_phase(action: str) -> str:
    """The phase a Job ends in when the controller takes ``action``."""
    phases: dict[str, str] = {
        COMPLETE_JOB: COMPLETED,
        ABORT_JOB: ABORTED,
        "TerminateJob": TERMINATED,
    }
    return phases.get(action, FAILED)


def job_object(
    manifest: Mapping[str, Any], *, name: str, phase: str, restarts: int
) -> dict[str, Any]:
    """The Job as the API returns it: named, with its phase and restart count."""
    obj = copy.deepcopy(dict(manifest))
    obj.setdefault("metadata", {})["name"] = name
    obj["status"] = {"state": {"phase": phase}, "retryCount": restarts}
    return obj


def pod_specs(job: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(path, pod spec)`` of each task's pod template, for checks on what the pods run."""
    tasks = (job.get("spec") or {}).get("tasks") or []
    return [
        (f"spec.tasks[{i}].template.spec", (t.get("template") or {}).get("spec") or {})
        for i, t in enumerate(tasks)
    ]


def gang_problems(job: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The whole-gang rule, as ``(field path, what is wrong)``: ``minAvailable`` equals the
    pod count (at least 1), every count a whole number, so the gang is admitted whole or not
    at all."""
    spec = job.get("spec") or {}
    if "minAvailable" not in spec:
        return [
            (
                "spec.minAvailable",
                "missing: set it to the number of pods so the gang is scheduled all together",
            )
        ]
    tasks = spec.get("tasks") or []
    raw = {f"spec.tasks[{i}].replicas": t.get("replicas", 0) for i, t in enumerate(tasks)}
    raw["spec.minAvailable"] = spec["minAvailable"]
    not_ints = [
        (path, f"{v!r} is not a whole number of pods")
        for path, v in raw.items()
        if isinstance(v, bool) or not isinstance(v, int)
    ]
    if not_ints:
        return not_ints
    counts = [int(t.get("replicas", 0)) for t in tasks]
    negative = [
        (f"spec.tasks[{i}].replicas", f"is {c}; a task cannot have fewer than 0 pods")
        for i, c in enumerate(counts)
        if c < 0
    ]
    min_available = int(spec["minAvailable"])
    if min_available < 1:
        return [
            *negative,
            ("spec.minAvailable", f"is {min_available}; a gang needs at least 1 pod"),
        ]
    if negative:
        return negative
    if min_available != sum(counts):
        return [
            (
                "spec.minAvailable",
                f"is {min_available} but the job has {sum(counts)} "
                "pods; a partial gang deadlocks distributed training — make them equal",
            )
        ]
    return []


_SIZE_LINE = re.compile(r"^\s*(replicas|minAvailable)\s*:.*$", re.M)


def size_lines(manifest: str) -> list[str]:
    """The lines of a Job manifest (as a resource template holds it: text with placeholders)
    that set its size: each task's ``replicas`` and the gang's ``minAvailable``."""
    return [m.group(0) for m in _SIZE_LINE.finditer(manifest)]
