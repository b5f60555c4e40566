"""One attempt of one node, and what every runner needs from the run it belongs to."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangway.local._artifacts import ArtifactStore
from gangway.local._boundary import Budget
from gangway.local._clock import Clock
from gangway.local._env import Secrets
from gangway.local._gang import max_local_pods
from gangway.local._processes import ProcessGroups
from gangway.local._results import NodeResult

__all__ = ["Attempt", "RunContext", "safe_name"]


@dataclass(frozen=True)
class RunContext:
    """What the runners share: the run's processes, environment, limits and clock."""

    procs: ProcessGroups
    env: Mapping[str, str]
    """The environment every step starts from (this process's, plus the run's)."""
    parallelism: int | None
    """At most this many leaf steps run at once (None: no limit)."""
    grace: float
    """Seconds between SIGTERM and SIGKILL when a step or pod is stopped."""
    clock: Clock
    progress: Callable[[NodeResult], None]
    """Called when a running node has news (a gang restart, a retry to come)."""
    workflow: str = "workflow"
    """The workflow's name: the first part of every artifact's key."""
    secrets: Secrets = field(default_factory=lambda: Secrets(None, {}))
    artifacts: ArtifactStore | None = None
    volume_root: Path | None = None
    """Where volumes that outlive a pod (claims) are: one directory per claim name."""
    claims: tuple[str, ...] = ()
    """The ``volumeClaimTemplates``: volumes every template may mount by name."""
    pod_volumes: tuple[Mapping[str, Any], ...] = ()
    """``spec.volumes``: what every template of the workflow may mount."""
    busy: Callable[[], int] = lambda: 1
    """How many leaf steps run now (the caller included): how many share the cores."""
    gangs: Budget = field(default_factory=lambda: Budget(max_local_pods()))
    """This machine's processes, shared by the gangs that run side by side."""


@dataclass(frozen=True)
class Attempt:
    """One attempt of one node: what to run, with which variables, where."""

    template: Mapping[str, Any]
    scope: Mapping[str, str]
    node: NodeResult
    scratch: Path
    """This attempt's own directory: ``/gangway`` of the step."""
    log_dir: Path
    artifacts: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Input artifacts: name → ``("uri", URI)`` or ``("raw", data)``."""

    @property
    def key(self) -> str:
        """Where this attempt's output artifacts go, under the artifact repository."""
        return f"{safe_name(self.node.name)}/attempt-{self.node.attempts}"

    @property
    def where(self) -> str:
        return f"template {self.template['name']}"


def safe_name(name: str) -> str:
    """A node name as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]
