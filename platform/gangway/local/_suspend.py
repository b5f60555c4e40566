"""A ``suspend`` template, locally: wait for its ``duration``, or — without one — until the
run is resumed (:func:`resume`, which ``gangway resume`` calls, or ``--auto-resume``).

A resume is a file under the run's directory (``resume/NODE``, or ``resume/*`` for every
suspended node), so it can come from another process; the waiting node polls for it.
Output parameters ``valueFrom.supplied`` take the values the resume gives, else their default.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gangway.argo.retries import duration_seconds
from gangway.argo.substitution import substitute
from gangway.errors import NotFoundError, PermanentError
from gangway.local._attempt import safe_name
from gangway.local._results import NodeResult
from gangway.storage import write_atomic

if TYPE_CHECKING:
    from gangway.local._walk import Walker

__all__ = ["SUSPENDED", "clear_resumes", "executing", "resume", "run_suspend"]

ALL = "_all_"
EXECUTING = "executing"
SUSPENDED = "suspended: waiting for"
"""How a node waiting for a resume says so (``gangway run`` prints the command)."""


def resume(
    state_dir: Path, workflow: str, node: str | None = None, values: Mapping[str, str] | None = None
) -> Path:
    """Resume ``workflow``'s suspended node ``node`` (every one when None), supplying
    ``values`` for their ``supplied`` outputs; returns the file written."""
    root = state_dir.resolve() / "runs" / workflow
    if not root.is_dir():
        from gangway.local.state import runs_below

        runs = sorted(p.name for p in (state_dir.resolve() / "runs").glob("*") if p.is_dir())
        known = f"; runs there: {', '.join(runs)}" if runs else ""
        below = next((d for d, r in runs_below(state_dir) if workflow in (r.name, r.uid)), None)
        if below is not None:
            known += (
                f"; it is in {below}: `gangway resume {shlex.quote(workflow)} --state-dir "
                f"{shlex.quote(str(below))}`"
            )
        raise NotFoundError(f"no local run named {workflow!r} in {state_dir}{known}")
    if not _running(root):
        raise PermanentError(
            f"workflow {workflow} is not running: nothing to resume (a run that ended is "
            f"resumed with `gangway retry {workflow}`)"
        )
    path = root / "resume" / (safe_name(node) if node else ALL)
    write_atomic(path, json.dumps(dict(values or {})).encode())
    return path


def _running(root: Path) -> bool:
    """Whether an executor is running the workflow (it holds :data:`EXECUTING`'s lock)."""
    import fcntl

    lock = root / EXECUTING
    if not lock.is_file():
        return False
    with lock.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


@contextlib.contextmanager
def executing(root: Path) -> Iterator[None]:
    """Held while an executor runs the workflow: :func:`resume` refuses a run not held."""
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with (root / EXECUTING).open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def clear_resumes(root: Path) -> None:
    """Forget resumes left from an earlier attempt: a new attempt waits for its own."""
    import shutil

    shutil.rmtree(root / "resume", ignore_errors=True)


def run_suspend(
    w: Walker, template: Mapping[str, Any], scope: Mapping[str, str], node: NodeResult
) -> NodeResult:
    spec = template.get("suspend") or {}
    raw = substitute(str(spec.get("duration", "")), scope, where=f"{node.name}.suspend.duration")
    node.phase, node.attempts = "Running", 1
    started = w.clock.now()
    supplied: dict[str, str] = {}
    if raw:
        seconds = duration_seconds(raw)  # a Go duration or bare seconds
        node.message = f"suspended for {raw}"
        w.event(node)
        while w.clock.now() - started < seconds and not w.stopping:
            w.clock.sleep(min(0.2, max(0.0, seconds - (w.clock.now() - started))))
    elif w.auto_resume:
        node.message = "suspended: resumed at once (--auto-resume)"
    else:
        node.message = f"{SUSPENDED} `gangway resume {w.root.name}`"
        w.event(node)
        supplied = _wait(w, node)
        node.message = "resumed"
    node.phase = "Failed" if w.stopping else "Succeeded"
    if w.stopping:
        node.message = "stopped while suspended"
    node.outputs = _supplied(template, supplied) if node.phase == "Succeeded" else {}
    node.seconds = round(w.clock.now() - started, 2)
    w.record(node)
    return node


def _wait(w: Walker, node: NodeResult) -> dict[str, str]:
    folder = w.root / "resume"
    mine, anyone = folder / safe_name(node.name), folder / ALL
    while not w.stopping:
        for path in (mine, anyone):
            if path.is_file():
                try:
                    values = json.loads(path.read_text() or "{}")
                except ValueError:
                    values = {}
                if path == mine:
                    path.unlink(missing_ok=True)
                return {str(k): str(v) for k, v in values.items()}
        time.sleep(0.2)
    return {}


def _supplied(template: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for p in (template.get("outputs") or {}).get("parameters") or []:
        vf = p.get("valueFrom") or {}
        if p["name"] in values:
            out[p["name"]] = values[p["name"]]
        elif "default" in vf or "default" in p:
            out[p["name"]] = str(vf.get("default", p.get("default")))
        elif "supplied" in vf:
            raise PermanentError(
                f"output {p['name']!r} of suspend template {template.get('name')!r} must be "
                f"supplied: resume with `gangway resume WORKFLOW --set {p['name']}=VALUE` "
                "(--auto-resume cannot supply it: give it a default)"
            )
    return out
