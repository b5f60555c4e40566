"""What a local run keeps in its state directory, so that ``gangway retry`` can resume it.

``{state-dir}/runs/{workflow name}/`` holds ``run.json`` (the Workflow object exactly as it was
run — name, uid, parameter values — and the environment its steps need) and ``nodes.json``
(every node's phase, outputs and attempts, rewritten atomically as each node ends). A run that
was killed outright still has the nodes that ended before the kill.

A state directory without runs of its own may hold others one level below (``make demo`` runs
with ``--state-dir .gangway/demo``, every command defaults to ``.gangway``): those are named in
the error, with the command that uses them, and never used in its place — the run's storage,
logs and MLflow store are under its own state directory.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from gangway.errors import NotFoundError, PermanentError, field_errors
from gangway.local._results import NodeResult
from gangway.storage import os_errors, write_atomic

__all__ = ["SavedRun", "find_run", "load_nodes", "runs_below", "save_nodes", "save_run"]

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
    """The run named ``ref`` (its name or uid), or the newest run in ``state_dir``.

    When it is not there but in a state directory one level below (``.gangway/demo`` under
    ``.gangway``), the error names that directory and the ``gangway retry … --state-dir``
    that retries it; the run is never taken from there in its place."""
    runs, bad = _runs(state_dir)
    if ref in bad:
        raise bad[ref]
    if not runs and bad:
        raise next(iter(bad.values()))
    if not runs:
        elsewhere = _elsewhere(state_dir, ref)
        raise NotFoundError(
            f"no local runs in {state_dir}; {elsewhere}"
            if elsewhere
            else f"no local runs in {state_dir}: start one with `gangway run PIPELINE "
            f"--state-dir {shlex.quote(str(state_dir))}`"
        )
    if ref is None:
        return max(runs, key=lambda r: r.created)
    found = [r for r in runs if ref in (r.name, r.uid)]
    if not found:
        names = ", ".join(r.name for r in sorted(runs, key=lambda r: r.created))
        elsewhere = _elsewhere(state_dir, ref)
        raise NotFoundError(
            f"no run named {ref!r} in {state_dir} (runs there: {names})"
            + (f"; {elsewhere}" if elsewhere else "")
        )
    return found[0]


def runs_below(state_dir: Path) -> list[tuple[Path, SavedRun]]:
    """The readable runs of the state directories one level below ``state_dir`` (as
    ``gangway run --state-dir .gangway/demo`` leaves under ``.gangway``), newest first."""
    found = [
        (sub, run)
        for sub in sorted(state_dir.glob("*"))
        if (sub / "runs").is_dir()
        for run in _runs(sub)[0]
    ]
    return sorted(found, key=lambda pair: pair[1].created, reverse=True)


def _runs(state_dir: Path) -> tuple[list[SavedRun], dict[str, PermanentError]]:
    """The readable runs in ``state_dir``, and the error of each damaged one by its name."""
    runs, bad = [], {}
    for path in sorted((state_dir.resolve() / "runs").glob(f"*/{RUN_FILE}")):
        try:
            runs.append(_valid(SavedRun, path))
        except PermanentError as e:  # one damaged record does not hide the others
            bad[path.parent.name] = e
    return runs, bad


def _elsewhere(state_dir: Path, ref: str | None) -> str | None:
    """Where below ``state_dir`` the run ``ref`` is (the newest run to retry when None), with
    the command that retries it there; None when no state directory below has it."""
    below = [(d, r) for d, r in runs_below(state_dir) if ref is None or ref in (r.name, r.uid)]
    if not below:
        return None
    to_retry = [(d, r) for d, r in below if _phase(d, r.name) != "Succeeded"]
    if not to_retry:
        where, run = below[0]
        which = (
            f"{ref!r} is in {where} and succeeded"
            if ref
            else f"every run below it succeeded (newest: {run.name} in {where})"
        )
        return (
            f"{which}: nothing to retry; start a new one with `gangway run PIPELINE "
            f"--state-dir {shlex.quote(str(where))}`"
        )
    where, run = to_retry[0]
    newest_there = next(r for d, r in below if d == where)
    named = ref or (None if run is newest_there else run.name)
    picked = [shlex.quote(named)] if named else []
    command = " ".join(["gangway retry", *picked, "--state-dir", shlex.quote(str(where))])
    return f"{where} has {run.name} ({_phase(where, run.name)}): `{command}` retries it there"


def _phase(state_dir: Path, name: str) -> str:
    """The run's recorded phase (a damaged record: what ``gangway retry`` will report)."""
    try:
        return load_nodes(state_dir, name)[0]
    except PermanentError:
        return "unreadable nodes.json"


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
