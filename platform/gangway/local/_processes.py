"""Every process a local run starts, so that stopping the run leaves none behind.

Each step and each gang pod starts in a process group of its own (as a container would), and
carries ``GANGWAY_PROC=<run token>.<n>`` in its environment. Signals go to the group; what
escaped it — torchrun starts its workers in sessions of their own — is found by that variable
(``/proc/<pid>/environ``, which children inherit), so a kill reaches a whole process tree, and
the end of a run can check that nothing of it survives.

Stopping follows Kubernetes' pod termination: SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PROC_ENV", "ProcessGroups", "Stopped", "kill_pids", "processes_with"]

PROC_ENV = "GANGWAY_PROC"


class Stopped(Exception):
    """The run is stopping: no new process is started."""


def processes_with(token: str) -> list[int]:
    """Live processes whose ``GANGWAY_PROC`` is ``token`` or below it (``token.N``)."""
    want, below = f"{PROC_ENV}={token}".encode(), f"{PROC_ENV}={token}.".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if any(e == want or e.startswith(below) for e in env):
            found.append(int(entry.name))
    return [p for p in found if p != os.getpid()]


class ProcessGroups:
    """The processes of one local run: start, stop gracefully, and sweep what is left."""

    def __init__(self, token: str | None = None) -> None:
        """``token`` tags every process (``<token>.<n>``); a run uses ``<workflow uid>.<x>``,
        so that what a killed run left behind can be found by its uid."""
        self.token = token or uuid.uuid4().hex[:12]
        self.stopping: int | None = None
        """The signal the run is stopping on (None while it runs)."""
        self._procs: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
        # Re-entrant: a signal handler (stop) may run on the thread that is inside start().
        self._lock = threading.RLock()
        self._count = 0
        self._timer: threading.Timer | None = None

    def start(
        self, argv: Sequence[str], *, env: dict[str, str], **popen: Any
    ) -> subprocess.Popen[bytes]:
        """``Popen`` in a new process group, tagged; refused once the run is stopping."""
        with self._lock:
            if self.stopping is not None:
                raise Stopped(f"not started: the run is stopping ({_name(self.stopping)})")
            self._count += 1
            tag = f"{self.token}.{self._count}"
            # A process group of its own (signals reach all of it, the terminal's Ctrl-C does
            # not), but the same session: with the kernel's autogroup scheduling a session per
            # step made OpenMP threads of side-by-side steps wait on each other ~30x longer.
            proc = subprocess.Popen(
                list(argv), env={**env, PROC_ENV: tag}, process_group=0, **popen
            )
            self._procs[proc.pid] = (proc, tag)
            if self.stopping is not None:  # a stop arrived while it was starting
                self.signal(proc, signal.SIGTERM)
            return proc

    def signal(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        """Signal the process's group (the launcher, torchrun, whatever shares its group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the process's whole tree (its group and every process carrying its tag),
        reap it, and forget it."""
        self.signal(proc, signal.SIGKILL)
        with self._lock:
            _, tag = self._procs.pop(proc.pid, (proc, ""))
        if tag:
            kill_pids(processes_with(tag))
        with contextlib.suppress(ChildProcessError):
            proc.wait()

    def stop(self, sig: int, grace: float) -> None:
        """Stop the run: SIGTERM every process group now, SIGKILL everything after ``grace``
        seconds. A second call (a second Ctrl-C) kills at once."""
        with self._lock:
            again = self.stopping is not None
            self.stopping = sig
            procs = [p for p, _ in self._procs.values()]
        if again:
            self.kill_all()
            return
        for p in procs:
            self.signal(p, signal.SIGTERM)
        self._timer = threading.Timer(grace, self.kill_all)
        self._timer.daemon = True
        self._timer.start()

    def kill_all(self) -> None:
        """SIGKILL every process of the run, wherever it is."""
        with self._lock:
            procs = [p for p, _ in self._procs.values()]
        for p in procs:
            self.signal(p, signal.SIGKILL)
        kill_pids(processes_with(self.token))

    def reset(self) -> None:
        """After a stop that was not the user's (the workflow's deadline): kill what is left,
        then let processes start again (the exit handler runs after a deadline)."""
        if self._timer is not None:
            self._timer.cancel()
        self.kill_all()
        with self._lock:
            self.stopping = None

    def close(self) -> list[int]:
        """At the end of the run: cancel the kill timer, kill any survivor; returns their pids."""
        if self._timer is not None:
            self._timer.cancel()
        left = processes_with(self.token)
        kill_pids(left)
        return left


def kill_pids(pids: list[int]) -> None:
    """SIGKILL these processes (gone already is fine)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
