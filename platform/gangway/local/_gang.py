"""Running a Volcano Job locally: one process per pod on 127.0.0.1.

Each pod gets what Volcano's pytorch plugin injects (``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE`` = pods, ``RANK`` = pod index, master first) and ``$(VAR)`` references in its
command are expanded the way the kubelet does. Lifecycle policies are applied as Volcano does:
an ``exitCode`` policy first, then ``PodFailed``; ``RestartJob`` restarts the whole gang up to
``maxRetry`` times; ``TaskCompleted`` → ``CompleteJob`` completes the job when the task's pods
have all succeeded. The job ends in phase Completed, Failed, Aborted or Terminated, and is
returned as the API would return it, with that status. What the fields mean is read through
:mod:`gangway.volcano`; the clock is the run's (:class:`gangway.local._clock.Clock`).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gangway.contract import ENV_SUBMITTED_MS
from gangway.errors import UnsupportedConstruct
from gangway.local._paths import map_scratch
from gangway.local._processes import Stopped
from gangway.step.main import error_summary
from gangway.step.torchrun import processes_per_pod
from gangway.volcano.gang import Gang, end_phase, job_object, pytorch_env, read_gang
from gangway.volcano.job import ABORT_JOB, ABORTED, COMPLETE_JOB, RESTART_JOB

if TYPE_CHECKING:
    from gangway.local._attempt import RunContext

__all__ = ["GangOutcome", "gang_processes", "max_local_pods", "oversized", "run_volcano_job"]

_KUBE_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class GangOutcome:
    phase: str
    """The Job's phase: Completed, Failed, Aborted or Terminated."""
    restarts: int
    exit_codes: dict[str, int]
    message: str
    job: dict[str, Any] = field(default_factory=dict)
    """The Job as the API would return it: named, with its status."""


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


def _pods(gang: Gang, scratch: Callable[[str], Path], port: int) -> list[_Pod]:
    total = gang.pods
    too_large = oversized(gang)
    if too_large is not None:
        raise UnsupportedConstruct(too_large)
    pods: list[_Pod] = []
    for task in gang.ranked():  # the master task first: rank 0
        if len(task.containers) != 1:
            raise UnsupportedConstruct(
                f"Volcano task {task.name}: exactly one container per pod is supported locally"
            )
        c = task.containers[0]
        for i in range(task.replicas):
            name = f"{task.name}-{i}"
            env = {e["name"]: str(e.get("value", "")) for e in c.get("env") or []}
            if gang.pytorch is not None:
                env.update(pytorch_env(master_port=port, world_size=total, rank=len(pods)))
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(1, total)))
            argv = [
                kube_expand(a, env) for a in [*(c.get("command") or []), *(c.get("args") or [])]
            ]
            argv = [sys.executable if a == "python" and j == 0 else a for j, a in enumerate(argv)]
            base = scratch(name)
            pods.append(_Pod(name, task.name, [map_scratch(a, base) for a in argv], env))
    if not pods:
        raise UnsupportedConstruct("Volcano Job has no pods (every task has 0 replicas)")
    return pods


def max_local_pods() -> int:
    """The largest gang this machine runs, in pods and in training processes all told: each
    pod is a torchrun with its workers, every one a process of this machine."""
    return max(8, 4 * (os.cpu_count() or 1))


def gang_processes(gang: Gang) -> int:
    """The training processes ``gang`` starts: each pod's torchrun ``--nproc-per-node`` (the
    launcher's arguments, ``args``, are torchrun's)."""
    return sum(
        task.replicas
        * max(
            (processes_per_pod([str(a) for a in c.get("args") or []]) for c in task.containers),
            default=1,
        )
        for task in gang.tasks
    )


def oversized(gang: Gang) -> str | None:
    """Why ``gang`` is more than this machine can run (None when it fits), with the numbers."""
    pods, procs, cap = gang.pods, gang_processes(gang), max_local_pods()
    if pods <= cap and procs <= cap:
        return None
    return (
        f"a gang of {pods} pod(s) with {procs} training process(es) in all is more than this "
        f"machine runs ({os.cpu_count() or 1} CPUs: at most {cap} pods and {cap} processes); "
        "make it smaller, or run it on a cluster with `gangway submit`"
    )


def _stop(pods: list[_Pod], ctx: RunContext, grace: float) -> None:
    """SIGTERM every pod's processes, wait up to ``grace`` seconds, then SIGKILL what is left
    (a worker stuck in a collective whose peer is gone would otherwise linger)."""
    started = [p.proc for p in pods if p.proc is not None]
    for proc in started:
        ctx.procs.signal(proc, signal.SIGTERM)
    deadline = ctx.clock.now() + grace
    for proc in started:
        if proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - ctx.clock.now()))
    for proc in started:
        ctx.procs.kill(proc)


def run_volcano_job(
    job: Mapping[str, Any],
    *,
    name: str,
    scratch: Callable[[str], Path],
    log_dir: Path,
    cwd: Path,
    ctx: RunContext,
    on_restart: Callable[[int, str], None] | None = None,
) -> GangOutcome:
    """Run the job's pods as local processes until Volcano would call the job finished.

    When the run is stopping (``ctx.procs.stopping``) the gang is not restarted: it ends
    Aborted.
    """
    gang = read_gang(job)
    restarts = 0
    while True:
        action, reason, codes = _run_once(gang, scratch, log_dir, cwd, ctx)
        stopping = ctx.procs.stopping is not None
        if action == RESTART_JOB and restarts < gang.max_retry and not stopping:
            restarts += 1
            if on_restart:
                on_restart(restarts, reason)
            continue
        phase = ABORTED if stopping and action != COMPLETE_JOB else end_phase(action)
        if action == RESTART_JOB and not stopping:
            reason += f"; {gang.gave_up}"
        status = job_object(job, name=name, phase=phase, restarts=restarts)
        return GangOutcome(phase, restarts, codes, reason, status)


def _run_once(
    gang: Gang, scratch: Callable[[str], Path], log_dir: Path, cwd: Path, ctx: RunContext
) -> tuple[str, str, dict[str, int]]:
    """Start every pod, watch them until the controller would act, stop them: the action,
    why, and the pods' exit codes."""
    pods = _pods(gang, scratch, _free_port())
    submitted = {ENV_SUBMITTED_MS: str(int(time.time() * 1000))}  # the Job (re)created
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        for p in pods:
            with (log_dir / f"{p.name}.log").open("ab") as log:
                p.proc = ctx.procs.start(
                    p.argv,
                    cwd=cwd,
                    env={**ctx.env, **submitted, **p.env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        action, reason, codes = _watch(pods, gang, ctx)
    except Stopped as e:
        action, reason, codes = ABORT_JOB, str(e), {}
    except BaseException:  # the caller is going away: leave no pod behind
        _stop(pods, ctx, grace=0)
        raise
    _stop(pods, ctx, ctx.grace)
    reason += _first_error(log_dir, [name for name, c in codes.items() if c != 0])
    return action, reason, codes


def _first_error(log_dir: Path, pods: list[str]) -> str:
    """The ``error:`` line a failed pod printed (what the user must fix), if any."""
    for name in pods:
        log = log_dir / f"{name}.log"
        if log.is_file():
            found = error_summary(log.read_text(errors="replace").splitlines())
            if found:
                return f" ({name}: {found})"
    return ""


def _watch(pods: list[_Pod], gang: Gang, ctx: RunContext) -> tuple[str, str, dict[str, int]]:
    tasks = {t.name: t for t in gang.tasks}
    codes: dict[str, int] = {}
    while True:
        for p in pods:
            assert p.proc is not None
            rc = p.proc.poll()
            if rc is None or p.name in codes:
                continue
            code = 128 - rc if rc < 0 else rc  # killed by a signal: 128 + signal number
            codes[p.name] = code
            if ctx.procs.stopping is not None:
                return ABORT_JOB, f"stopped: pod {p.name} exited {code}", codes
            if code != 0:
                action = gang.on_failure(tasks[p.task], code) or ABORT_JOB
                return action, f"pod {p.name} exited {code} -> {action}", codes
            if all(codes.get(q.name) == 0 for q in pods if q.task == p.task):
                completed = tasks[p.task].on_completed()
                if completed is not None:
                    return completed, f"task {p.task} completed", codes
        if len(codes) == len(pods):
            return COMPLETE_JOB, "all pods succeeded", codes
        _wait_any([p for p in pods if p.name not in codes])


def _wait_any(running: list[_Pod], poll: float = 0.05) -> None:
    """Block until a pod may have exited (at most ``poll`` seconds): a wait on the process,
    not on the run's clock, whose ``sleep`` is for backoff and may be a test's no-op."""
    proc = running[0].proc if running else None
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=poll)
