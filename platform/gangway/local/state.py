"""What a local run keeps in its state directory, so that ``gangway retry`` can resume it.

``{state-dir}/runs/{workflow name}/`` holds ``run.json`` (the Workflow object exactly as it was
run — name, uid, parameter values — and the environment its steps need) and ``nodes.json``
(every node's phase, outputs and attempts, rewritten atomically as each node ends). A run that
was killed outright still has the nodes that ended before the kill.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from gangway.errors import NotFoundError, PermanentError, field_errors
from gangway.local._model import NodeResult
from gangway.storage import os_errors, write_atomic

__all__ = ["SavedRun", "find_run", "load_nodes", "save_nodes", "save_run"]

M = TypeVar("M")
RUN_FILE = "run.json"
NODES_FILE = "nodes.json"


@dataclass
class SavedRun:
    """A local run as recorded: enough to run the same workflow again, with the same uid."""

    workflow: dict[str, Any]
    pipeline: str
    env: dict[str, str] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    @property
    def name(self) -> str:
        return str(self.workflow["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.workflow["metadata"]["uid"])


def run_dir(state_dir: Path, name: str) -> Path:
    return state_dir.resolve() / "runs" / name


def save_run(state_dir: Path, run: SavedRun) -> None:
    path = run_dir(state_dir, run.name) / RUN_FILE
    write_atomic(path, (json.dumps(asdict(run), indent=1, sort_keys=True) + "\n").encode())


def save_nodes(state_dir: Path, name: str, nodes: Iterable[NodeResult], phase: str) -> None:
    """Record every node (the latest word on each) and the run's phase."""
    doc = {
        "phase": phase,
        "nodes": [
            {**asdict(n), "log": str(n.log) if n.log else None}
            for n in {n.name: n for n in nodes}.values()
        ],
    }
    path = run_dir(state_dir, name) / NODES_FILE
    write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


class _Nodes(BaseModel):
    phase: str
    nodes: list[NodeResult]


def load_nodes(state_dir: Path, name: str) -> tuple[str, dict[str, NodeResult]]:
    """The run's phase and its nodes by name (none yet: ``("Running", {})``)."""
    path = run_dir(state_dir, name) / NODES_FILE
    if not path.is_file():
        return "Running", {}
    doc = _valid(_Nodes, path)
    return doc.phase, {n.name: n for n in doc.nodes}


def find_run(state_dir: Path, ref: str | None) -> SavedRun:
    """The run named ``ref`` (its name or uid), or the newest run in ``state_dir``."""
    runs, bad = [], {}
    for path in sorted((state_dir.resolve() / "runs").glob(f"*/{RUN_FILE}")):
        try:
            runs.append(_valid(SavedRun, path))
        except PermanentError as e:  # one damaged record does not hide the others
            bad[path.parent.name] = e
    if ref in bad:
        raise bad[ref]
    if not runs and bad:
        raise next(iter(bad.values()))
    if not runs:
        raise NotFoundError(
            f"no local runs in {state_dir}: start one with `gangway run PIPELINE "
            f"--state-dir {state_dir}`"
        )
    if ref is None:
        return max(runs, key=lambda r: r.created)
    found = [r for r in runs if ref in (r.name, r.uid)]
    if not found:
        names = ", ".join(r.name for r in sorted(runs, key=lambda r: r.created))
        raise NotFoundError(f"no run named {ref!r} in {state_dir}; runs there: {names}")
    return found[0]


def _valid(model: type[M], path: Path) -> M:
    """``path`` read as ``model``, or one error naming the file and what is wrong with it."""
    try:
        with os_errors("read", path):
            data = path.read_bytes()
        found = TypeAdapter(model).validate_json(data)
        if isinstance(found, SavedRun):
            meta = found.workflow.get("metadata")
            if not (isinstance(meta, dict) and meta.get("name") and meta.get("uid")):
                raise ValueError("workflow.metadata needs a name and a uid")
        return found
    except (ValidationError, ValueError) as e:
        why = (
            field_errors(e, root="(file)", limit=3)
            if isinstance(e, ValidationError)
            else str(e).splitlines()[0]
        )
        raise PermanentError(
            f"{path}: unreadable run state ({why}); this run cannot be retried — start a new "
            "one with `gangway run`"
        ) from None
