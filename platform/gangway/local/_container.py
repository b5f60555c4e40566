"""Running a container or script template: its command in a subprocess, in the attempt's
scratch directory, with its log and output parameters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gangway.argo.substitution import substitute_tree
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._logs import error_summary
from gangway.local._model import Outcome
from gangway.local._processes import Stopped
from gangway.local._scratch import map_scratch

__all__ = ["ATTEMPT_HEADER", "run_container"]

ATTEMPT_HEADER = "--- attempt "
"""Starts the line the executor writes into a step's log before each attempt."""


def run_container(a: Attempt, ctx: RunContext) -> Outcome:
    """Run the attempt's container (or script) to its end; its processes end with it."""
    c = substitute_tree(
        dict(a.template.get("container") or a.template.get("script") or {}), a.scope, where=a.where
    )
    argv = [*(c.get("command") or []), *(c.get("args") or [])]
    if "script" in a.template:
        src = a.scratch / "script"
        src.write_text(str(c.get("source", "")))
        argv.append(str(src))
    if argv[0] == "python":
        argv[0] = sys.executable
    argv = [map_scratch(arg, a.scratch) for arg in argv]
    env = dict(ctx.env)
    # Side-by-side steps share the cores, as pods share a node: one OpenMP pool each.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // ctx.parallelism)))
    env.update(
        {e["name"]: map_scratch(str(e.get("value", "")), a.scratch) for e in c.get("env") or []}
    )
    a.node.log = a.log_dir / f"{safe_name(a.node.name)}.log"
    with a.node.log.open("ab") as log:
        log.write(f"{ATTEMPT_HEADER}{a.node.attempts}: {' '.join(argv)}\n".encode())
        log.flush()
        try:
            proc = ctx.procs.start(
                argv, cwd=a.scratch, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        except Stopped as e:
            return Outcome("Failed", None, str(e))
        try:
            rc = proc.wait()
        finally:
            ctx.procs.kill(proc)  # a step's processes end with it: sweep them
    if rc != 0:
        status, code = ("Error", 128 - rc) if rc < 0 else ("Failed", rc)
        return Outcome(status, code, f"exit code {code}" + _tail(a.node.log))
    return _outputs(a)


def _outputs(a: Attempt) -> Outcome:
    """The output parameters the step wrote (``valueFrom.path``, else its default)."""
    outs: dict[str, str] = {}
    for p in (a.template.get("outputs") or {}).get("parameters", []):
        vf = p.get("valueFrom") or {}
        path = Path(map_scratch(str(vf["path"]), a.scratch))
        if path.is_file():
            outs[p["name"]] = path.read_text()
        elif "default" in vf:
            outs[p["name"]] = str(vf["default"])
        else:
            return Outcome(
                "Error", 0, f"output parameter {p['name']}: {vf['path']} was not written"
            )
    return Outcome("Succeeded", 0, "", outs)


def _tail(log: Path | None, lines: int = 3) -> str:
    """What the log says went wrong: its ``error:`` line, else its last lines."""
    if log is None or not log.is_file():
        return ""
    text = [
        ln
        for ln in log.read_text(errors="replace").splitlines()
        if ln.strip() and not ln.startswith(ATTEMPT_HEADER)  # our own line, not the step's
    ]
    found = error_summary(text) or " | ".join(text[-lines:])[:300]
    return f": {found}" if text else ""
