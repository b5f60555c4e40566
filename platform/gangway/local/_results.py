"""What a local run produces: an :class:`Outcome` per attempt, a :class:`NodeResult` per task
(or fanned-out item), a :class:`RunResult` for the run; and how the children of a DAG or steps
template ended (:class:`Body`), under their node names (:func:`child_name`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gangway.errors import UnsupportedConstruct

__all__ = ["Body", "NodeResult", "Outcome", "RunResult", "UnsupportedConstruct", "child_name"]


@dataclass(frozen=True)
class Outcome:
    """How one attempt of a node ended."""

    status: str
    """Succeeded, Failed (the step's own non-zero exit) or Error (killed by a signal, an
    output that was not written)."""
    exit_code: int | None = None
    message: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    """Output parameters, when it succeeded."""
    result: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    daemoned: bool = False


@dataclass
class NodeResult:
    """One task (or one fanned-out item of a task) of a local run."""

    name: str
    task: str
    template: str
    phase: str = "Pending"  # Pending Running Succeeded Failed Error Skipped Omitted
    attempts: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    message: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    log: Path | None = None
    cached: bool = False
    """Not run: its outputs came from a verified cache entry (:mod:`gangway.step.caching`)."""
    result: str | None = None
    """``outputs.result``: the step's standard output, less one trailing newline."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """Output artifacts: name → the URI where the local artifact repository keeps it."""
    daemoned: bool = False
    """A daemon that was started and is ready (Argo's ``Daemoned``)."""
    children: list[NodeResult] = field(default_factory=list)
    """For a fanned-out task's summary (never recorded itself): its items' nodes."""


@dataclass
class RunResult:
    """The outcome of a local run of a workflow."""

    name: str
    uid: str
    phase: str
    nodes: list[NodeResult]
    parameters: dict[str, str]
    state_dir: Path
    seconds: float
    interrupted: int | None = None
    """The signal that stopped the run (SIGINT, SIGTERM), if one did."""
    error: str = ""
    """What ended the run early when it was not a step's failure (an executor error)."""
    error_retryable: bool = False
    """Whether that error may pass (transient): otherwise the workflow must change first."""
    survivors: list[int] = field(default_factory=list)
    """Processes of the run still alive at its end (killed then; should be none)."""
    outputs: dict[str, str] = field(default_factory=dict)
    """``workflow.outputs.parameters``: the outputs with a ``globalName``."""


@dataclass
class Body:
    """How a DAG's or steps' children ended."""

    phase: str
    scope: dict[str, str] = field(default_factory=dict)
    """The scope of their results (``tasks.*`` / ``steps.*``), for the template's outputs."""
    message: str = ""


def child_name(prefix: str, name: str, group: int | None = None) -> str:
    """A child's node name: ``task`` / ``[0].step`` at the top, ``N.task`` / ``N[0].step``
    inside node ``N``."""
    if group is not None:
        return f"{prefix}[{group}].{name}"
    return f"{prefix}.{name}" if prefix else name
