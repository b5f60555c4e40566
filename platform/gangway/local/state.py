"""What a local run keeps in its state directory, so that ``gangway retry`` can resume it.

``{state-dir}/runs/{workflow name}/`` holds ``run.json`` (the Workflow object exactly as it was
run — name, uid, parameter values — and the environment its steps need) and ``nodes.json``
(every node's phase, outputs and attempts, rewritten atomically as each node ends). A run that
was killed outright still has the nodes that ended before the kill.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gangway.errors import NotFoundError, PermanentError
from gangway.local._model import NodeResult
from gangway.storage import os_errors, write_atomic

__all__ = ["SavedRun", "find_run", "load_nodes", "save_nodes", "save_run"]

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


def load_nodes(state_dir: Path, name: str) -> tuple[str, dict[str, NodeResult]]:
    """The run's phase and its nodes by name (none yet: ``("Running", {})``)."""
    path = run_dir(state_dir, name) / NODES_FILE
    if not path.is_file():
        return "Running", {}
    doc = _read(path)
    nodes = {}
    for raw in doc.get("nodes") or []:
        node = NodeResult(**{**raw, "log": Path(raw["log"]) if raw.get("log") else None})
        nodes[node.name] = node
    return str(doc.get("phase", "Running")), nodes


def find_run(state_dir: Path, ref: str | None) -> SavedRun:
    """The run named ``ref`` (its name or uid), or the newest run in ``state_dir``."""
    runs = []
    for path in sorted((state_dir.resolve() / "runs").glob(f"*/{RUN_FILE}")):
        doc = _read(path)
        try:
            runs.append(SavedRun(**doc))
        except TypeError:
            raise PermanentError(f"{path}: not a run record Gangway wrote") from None
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


def _read(path: Path) -> Mapping[str, Any]:
    with os_errors("read", path):
        text = path.read_text()
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise PermanentError(f"{path}: unreadable run state ({e})") from None
    if not isinstance(doc, dict):
        raise PermanentError(f"{path}: unreadable run state (not a JSON object)")
    return doc
