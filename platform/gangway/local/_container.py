"""Running a container, script or containerSet template, and starting a daemon: each
container a process of this machine in the attempt's pod (:mod:`gangway.local._pod`)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from gangway.errors import PermanentError
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._deadline import DEADLINE, NoPod, PodDeadline, pod_deadline
from gangway.local._pod import ATTEMPT_HEADER, CannotStart, Pod, open_pod
from gangway.local._processes import Stopped
from gangway.local._results import Outcome
from gangway.step.main import error_summary

__all__ = ["ATTEMPT_HEADER", "run_container", "run_container_set", "start_daemon"]


def run_container(a: Attempt, ctx: RunContext) -> Outcome:
    """Run the attempt's container (or script) to its end, after its init containers and
    beside its sidecars; its processes end with it."""
    t = a.template
    script = "script" in t
    main = dict(t.get("script") or t.get("container") or {})
    inits, sidecars = list(t.get("initContainers") or []), list(t.get("sidecars") or [])
    started = time.monotonic()  # the node's start, which its timeout counts from
    with _pod(a, ctx, [main, *inits, *sidecars]) as pod:
        try:
            deadline = _deadline(pod, started)
            pod.place_inputs()
            for init in inits:
                rc, _ = pod.run(init, deadline=deadline.left())
                if rc is None:
                    return Outcome("Failed", None, DEADLINE)
                if rc != 0:
                    return Outcome(
                        "Failed", rc, f"init container {init.get('name')}: exit code {rc}"
                    )
            with _sidecars(pod, sidecars):
                rc, stdout = pod.run(main, script=script, deadline=deadline.left())
        except (CannotStart, NoPod) as e:
            return Outcome("Error", None, str(e))
        except Stopped as e:
            return Outcome("Failed", None, str(e))
        if rc is None:
            return Outcome("Failed", None, DEADLINE)
        return pod.outputs(rc, stdout, _failure(pod, rc))


def run_container_set(a: Attempt, ctx: RunContext) -> Outcome:
    """Run a ``containerSet``: its containers in dependency order, sharing the pod's volumes;
    the one named ``main`` (else the last) gives ``result`` and ``exitCode``."""
    spec = a.template.get("containerSet") or {}
    shared = list(spec.get("volumeMounts") or [])  # every container of the set mounts these
    containers: list[Mapping[str, Any]] = [
        {**c, "volumeMounts": [*shared, *(c.get("volumeMounts") or [])]}
        for c in spec.get("containers") or []
    ]
    order = _ordered(containers, a.where)
    last = next((c for c in containers if c.get("name") == "main"), order[-1] if order else {})
    started = time.monotonic()
    with _pod(a, ctx, containers) as pod:
        try:
            deadline = _deadline(pod, started)
            pod.place_inputs()
            stdout, rc_main = "", 0
            for c in order:
                rc, out = pod.run(c, deadline=deadline.left())
                if rc is None:
                    return Outcome("Failed", None, f"container {c.get('name')}: {DEADLINE}")
                if c is last:
                    stdout, rc_main = out, rc
                if rc != 0:
                    return pod.outputs(rc, out, f"container {c.get('name')}: exit code {rc}")
        except (CannotStart, NoPod) as e:
            return Outcome("Error", None, str(e))
        except Stopped as e:
            return Outcome("Failed", None, str(e))
        return pod.outputs(rc_main, stdout)


def start_daemon(a: Attempt, ctx: RunContext) -> tuple[Outcome, subprocess.Popen[bytes] | None]:
    """Start a daemon template's container and wait until it is ready (its readinessProbe
    answers, else it has stayed up a moment); the process runs on until the run stops it."""
    t = a.template
    main = dict(t.get("container") or t.get("script") or {})
    a.node.log = a.log_dir / f"{safe_name(a.node.name)}.log"
    log = a.node.log.open("ab")
    pod = open_pod(a, ctx, [main], log)
    pod.place_inputs()
    try:
        proc = pod.start(main, script="script" in t)
    except (Stopped, CannotStart) as e:
        log.close()
        return Outcome("Error" if isinstance(e, CannotStart) else "Failed", None, str(e)), None
    log.close()  # the daemon has its own copy
    ready, why = _ready(proc, main.get("readinessProbe") or {}, ctx)
    if not ready:
        ctx.procs.kill(proc)
        return Outcome("Failed", proc.returncode, f"daemon not ready: {why}{_tail(a)}"), None
    return Outcome("Succeeded", None, "daemoned: reachable on 127.0.0.1", daemoned=True), proc


@contextlib.contextmanager
def _pod(a: Attempt, ctx: RunContext, containers: list[Mapping[str, Any]]) -> Iterator[Pod]:
    a.node.log = a.log_dir / f"{safe_name(a.node.name)}.log"
    with a.node.log.open("ab") as log:
        yield open_pod(a, ctx, containers, log)


@contextlib.contextmanager
def _sidecars(pod: Pod, sidecars: list[Mapping[str, Any]]) -> Iterator[None]:
    procs = [pod.start(s) for s in sidecars]
    try:
        yield
    finally:
        for p in procs:
            pod.ctx.procs.kill(p)


def _deadline(pod: Pod, started: float) -> PodDeadline:
    """The pod's deadline (its template's ``timeout``, else ``activeDeadlineSeconds``)."""
    return pod_deadline(pod.a.template, pod.scope, started=started, node=pod.a.node.name)


def _ordered(containers: list[Mapping[str, Any]], where: str) -> list[Mapping[str, Any]]:
    """The containers of a containerSet, each after those it depends on."""
    names = {str(c.get("name")): c for c in containers}
    done: list[str] = []
    pending = list(names)
    while pending:
        ready = [n for n in pending if all(d in done for d in names[n].get("dependencies") or [])]
        if not ready:
            raise PermanentError(f"{where}: containerSet dependencies {pending} form a cycle")
        done.append(ready[0])
        pending.remove(ready[0])
    return [names[n] for n in done]


def _ready(
    proc: subprocess.Popen[bytes], probe: Mapping[str, Any], ctx: RunContext
) -> tuple[bool, str]:
    http, tcp = probe.get("httpGet"), probe.get("tcpSocket")
    limit = float(probe.get("initialDelaySeconds", 0)) + 60.0
    start = time.monotonic()
    while time.monotonic() - start < (limit if (http or tcp) else 0.5):
        if proc.poll() is not None:
            return False, f"it exited with code {proc.returncode}"
        if ctx.procs.stopping is not None:
            return False, "the run is stopping"
        if (http and _http_ok(http)) or (tcp and _tcp_ok(tcp)):
            return True, ""
        time.sleep(0.1)
    if http or tcp:
        return False, f"its readinessProbe did not answer in {limit:.0f}s"
    return proc.poll() is None, f"it exited with code {proc.returncode}"


def _http_ok(probe: Mapping[str, Any]) -> bool:
    url = f"http://127.0.0.1:{probe.get('port')}{probe.get('path', '/')}"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # loopback only
            return bool(200 <= r.status < 400)
    except OSError:
        return False


def _tcp_ok(probe: Mapping[str, Any]) -> bool:
    with (
        contextlib.suppress(OSError),
        socket.create_connection(("127.0.0.1", int(probe["port"])), 1),
    ):
        return True
    return False


def _failure(pod: Pod, rc: int) -> str:
    if rc == 0:
        return ""
    code = 128 - rc if rc < 0 else rc
    return f"exit code {code}{_tail(pod.a)}"


def _tail(a: Attempt, lines: int = 3) -> str:
    """What the log says went wrong: its ``error:`` line, else its last lines."""
    log = a.node.log
    if log is None or not log.is_file():
        return ""
    text = [
        ln
        for ln in log.read_text(errors="replace").splitlines()
        if ln.strip() and not ln.startswith(ATTEMPT_HEADER)  # our own line, not the step's
    ]
    found = error_summary(text) or " | ".join(text[-lines:])[:300]
    return f": {found}" if text else ""
