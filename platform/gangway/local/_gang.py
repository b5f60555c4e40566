"""Running a Volcano Job locally: one process per pod on 127.0.0.1.

Each pod gets what Volcano's pytorch plugin injects (``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE`` = pods, ``RANK`` = pod index, master first) and ``$(VAR)`` references in its
command are expanded the way the kubelet does. Lifecycle policies are applied as Volcano does:
an ``exitCode`` policy first, then ``PodFailed``; ``RestartJob`` restarts the whole gang up to
``maxRetry`` times; ``TaskCompleted`` → ``CompleteJob`` completes the job when the task's pods
have all succeeded. The job ends in phase Completed, Failed, Aborted or Terminated.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.local._model import UnsupportedConstruct
from gangway.local._processes import ProcessGroups, Stopped
from gangway.local._subst import map_scratch

__all__ = ["GangOutcome", "error_summary", "run_volcano_job"]

_KUBE_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class GangOutcome:
    phase: str  # Completed Failed Aborted Terminated
    restarts: int
    exit_codes: dict[str, int]
    message: str


@dataclass
class _Pod:
    name: str
    task: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None


def kube_expand(text: str, env: Mapping[str, str]) -> str:
    """Expand ``$(VAR)`` like the kubelet: defined variables only; ``$$`` is a literal ``$``."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _KUBE_VAR.sub(one, text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pods(job: Mapping[str, Any], scratch: Callable[[str], Path], port: int) -> list[_Pod]:
    spec = job.get("spec", {})
    tasks = spec.get("tasks") or []
    total = sum(int(t.get("replicas", 0)) for t in tasks)
    if total > max_local_pods():
        raise UnsupportedConstruct(
            f"a gang of {total} pods is too large to run on this machine (at most "
            f"{max_local_pods()}); run it on a cluster with `gangway submit`"
        )
    plugin_args = spec.get("plugins", {}).get("pytorch")
    pods: list[_Pod] = []
    rank = 0
    ordered = sorted(tasks, key=lambda t: t.get("name") != "master")  # master gets rank 0
    for task in ordered:
        containers = task.get("template", {}).get("spec", {}).get("containers") or []
        if len(containers) != 1:
            raise UnsupportedConstruct(
                f"Volcano task {task.get('name')}: exactly one container per pod is supported "
                "locally"
            )
        c = containers[0]
        for i in range(int(task.get("replicas", 0))):
            name = f"{task['name']}-{i}"
            env = {e["name"]: str(e.get("value", "")) for e in c.get("env") or []}
            if plugin_args is not None:
                env.update(
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    WORLD_SIZE=str(total),
                    RANK=str(rank),
                )
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(1, total)))
            base = scratch(name)
            argv = [
                kube_expand(a, env) for a in [*(c.get("command") or []), *(c.get("args") or [])]
            ]
            argv = [sys.executable if a == "python" and j == 0 else a for j, a in enumerate(argv)]
            pods.append(_Pod(name, task["name"], [map_scratch(a, base) for a in argv], env))
            rank += 1
    if not pods:
        raise UnsupportedConstruct("Volcano Job has no pods (every task has 0 replicas)")
    return pods


def max_local_pods() -> int:
    """The largest gang this machine runs: each pod is a torchrun with its workers."""
    return max(8, 4 * (os.cpu_count() or 1))


def _policy(policies: list[dict[str, Any]], code: int) -> str | None:
    for p in policies:
        if "exitCode" in p and int(p["exitCode"]) == code:
            return str(p["action"])
    for p in policies:
        if p.get("event") in ("PodFailed", "*"):
            return str(p["action"])
    return None


def _stop(pods: list[_Pod], procs: ProcessGroups, grace: float) -> None:
    """SIGTERM every pod's processes, wait up to ``grace`` seconds, then SIGKILL what is left
    (a worker stuck in a collective whose peer is gone would otherwise linger)."""
    started = [p.proc for p in pods if p.proc is not None]
    for proc in started:
        procs.signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in started:
        if proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    for proc in started:
        procs.kill(proc)


def run_volcano_job(
    job: Mapping[str, Any],
    *,
    scratch: Callable[[str], Path],
    log_dir: Path,
    cwd: Path,
    base_env: Mapping[str, str],
    procs: ProcessGroups,
    grace: float = 30.0,
    on_restart: Callable[[int, str], None] | None = None,
) -> GangOutcome:
    """Run the job's pods as local processes until Volcano would call the job finished.

    When the run is stopping (``procs.stopping``) the gang is not restarted: it ends Aborted.
    """
    spec = job.get("spec", {})
    max_retry = int(spec.get("maxRetry", 3))
    job_policies = list(spec.get("policies") or [])
    tasks = {t["name"]: t for t in spec.get("tasks") or []}
    restarts = 0
    while True:
        pods = _pods(job, scratch, _free_port())
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for p in pods:
                with (log_dir / f"{p.name}.log").open("ab") as log:
                    p.proc = procs.start(
                        p.argv,
                        cwd=cwd,
                        env={**base_env, **p.env},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
            action, reason, codes = _watch(pods, tasks, job_policies, procs)
        except Stopped as e:
            action, reason, codes = "AbortJob", str(e), {}
        except BaseException:  # the caller is going away: leave no pod behind
            _stop(pods, procs, grace=0)
            raise
        _stop(pods, procs, grace)
        reason += _first_error(log_dir, [name for name, c in codes.items() if c != 0])
        if action == "CompleteJob":
            return GangOutcome("Completed", restarts, codes, reason)
        if action == "RestartJob" and restarts < max_retry and procs.stopping is None:
            restarts += 1
            if on_restart:
                on_restart(restarts, reason)
            continue
        phase = {"AbortJob": "Aborted", "TerminateJob": "Terminated"}.get(action, "Failed")
        if procs.stopping is not None:
            phase = "Aborted"
        elif action == "RestartJob":
            reason += f"; gave up after maxRetry={max_retry} restarts"
        return GangOutcome(phase, restarts, codes, reason)


def _first_error(log_dir: Path, pods: list[str]) -> str:
    """The ``error:`` line a failed pod printed (what the user must fix), if any."""
    for name in pods:
        log = log_dir / f"{name}.log"
        if log.is_file():
            found = error_summary(log.read_text(errors="replace").splitlines())
            if found:
                return f" ({name}: {found})"
    return ""


def error_summary(lines: list[str]) -> str | None:
    """The last ``error:`` line of a log, with the items of a multi-line one (indented lines
    after a line ending in ':'), and nothing of a traceback that may follow."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    if not starts:
        return None
    i = starts[-1]
    detail = [lines[i]]
    if lines[i].endswith(":"):
        for ln in lines[i + 1 : i + 6]:
            if not ln.startswith("  ") or ln.lstrip().startswith("File "):
                break
            detail.append(ln.strip())
    return " ".join(detail)[:400]


def _watch(
    pods: list[_Pod],
    tasks: Mapping[str, Any],
    job_policies: list[dict[str, Any]],
    procs: ProcessGroups,
) -> tuple[str, str, dict[str, int]]:
    codes: dict[str, int] = {}
    while True:
        for p in pods:
            assert p.proc is not None
            rc = p.proc.poll()
            if rc is None or p.name in codes:
                continue
            code = 128 - rc if rc < 0 else rc  # killed by a signal: 128 + signal number
            codes[p.name] = code
            if procs.stopping is not None:
                return "AbortJob", f"stopped: pod {p.name} exited {code}", codes
            if code != 0:
                task_policies = list(tasks[p.task].get("policies") or [])
                action = _policy(task_policies + job_policies, code) or "AbortJob"
                return action, f"pod {p.name} exited {code} -> {action}", codes
            task_pods = [q for q in pods if q.task == p.task]
            if all(codes.get(q.name) == 0 for q in task_pods):
                for pol in tasks[p.task].get("policies") or []:
                    if pol.get("event") == "TaskCompleted":
                        return str(pol["action"]), f"task {p.task} completed", codes
        if len(codes) == len(pods):
            return "CompleteJob", "all pods succeeded", codes
        time.sleep(0.05)
