"""One attempt of a pod-running template, locally: its file system (:mod:`._paths`), its
volumes, its containers' commands and environments, its input artifacts put in place, and the
outputs it leaves (parameters, ``result``, ``exitCode``, artifacts).

Every container is a process of this machine, started in the attempt's scratch directory
(:mod:`gangway.local._processes`): init containers one after the other, sidecars beside the
main container, the containers of a ``containerSet`` in the order their dependencies give.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gangway.argo.substitution import substitute, substitute_tree
from gangway.errors import PermanentError
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._deadline import DEADLINE
from gangway.local._env import resolve_env
from gangway.local._paths import PodFiles, pod_files
from gangway.local._results import Outcome
from gangway.step.hera_runner import MOUNTS_ENV

__all__ = ["ATTEMPT_HEADER", "DEADLINE", "CannotStart", "Pod", "open_pod"]

ATTEMPT_HEADER = "--- attempt "
"""Starts the line the executor writes into a step's log before each attempt."""
MAX_RESULT = 256 * 1024
"""Argo keeps at most this much of a step's standard output (its end) as ``outputs.result``."""


class CannotStart(Exception):
    """A container's command could not be started (not on this machine, not executable)."""


@dataclass
class Pod:
    """One attempt's pod: where its files are and how its containers start."""

    a: Attempt
    ctx: RunContext
    files: PodFiles
    log: IO[bytes]
    facts: dict[str, str] = field(default_factory=dict)
    """What a ``fieldRef`` may read: ``metadata.name``, ``status.podIP``…"""

    @property
    def scope(self) -> dict[str, str]:
        """The attempt's variables and the paths Argo puts in scope —
        ``inputs.artifacts.NAME.path``, ``outputs.artifacts.NAME.path``,
        ``outputs.parameters.NAME.path`` — as the attempt's directories."""
        scope = dict(self.a.scope)
        for io in ("inputs", "outputs"):
            for kind in ("artifacts", "parameters"):
                for spec in (self.a.template.get(io) or {}).get(kind) or []:
                    path = spec.get("path") or (spec.get("valueFrom") or {}).get("path")
                    if path and not (io == "inputs" and kind == "parameters"):
                        scope[f"{io}.{kind}.{spec['name']}.path"] = str(self.files.host(str(path)))
        return scope

    def command(self, c: Mapping[str, Any], *, script: bool = False) -> list[str]:
        body = substitute_tree(self.files.tree(dict(c)), self.scope, where=self.a.where)
        argv = [str(x) for x in [*(body.get("command") or []), *(body.get("args") or [])]]
        if script:
            src = self.a.scratch / f"script-{safe_name(str(c.get('name') or 'main'))}"
            src.write_text(str(body.get("source", "")))
            src.chmod(0o755)  # as Argo's executor stages it: runnable by path
            argv = [*(argv or ["sh"]), str(src)]
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        if "hera.workflows.runner" in argv:  # Hera's runner, with the pod's paths mapped
            argv[argv.index("hera.workflows.runner")] = "gangway.step.hera_runner"
        return argv

    def environ(self, c: Mapping[str, Any]) -> dict[str, str]:
        env = dict(self.ctx.env)
        argv = [str(a) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
        if "source" in c and "hera.workflows.runner" not in argv:
            # An inline script runs from a staged file in its pod: the pipeline's folder is not
            # on its path (a sibling http.py must not hide the standard library's http).
            env.pop("PYTHONPATH", None)
            if os.environ.get("PYTHONPATH"):
                env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        # Side-by-side steps share the cores, as pods share a node: one OpenMP pool each
        # (without a cap, shared by the steps running now).
        share = max(1, self.ctx.parallelism or self.ctx.busy())
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // share)))
        env["TMPDIR"] = str(self.files.cwd("/tmp"))  # the pod's /tmp
        env[MOUNTS_ENV] = json.dumps([[k, str(v)] for k, v in self.files.mounts])
        filled = substitute_tree(self.files.tree(dict(c)), self.scope, where=self.a.where)
        env.update(resolve_env(filled, self.ctx.secrets, self.facts))
        return env

    def start(
        self, c: Mapping[str, Any], *, script: bool = False, capture: bool = False
    ) -> subprocess.Popen[bytes]:
        """Start container ``c``; its output goes to the step's log (and, with ``capture``,
        its standard output to a pipe as well)."""
        argv = self.command(c, script=script)
        if not argv:
            raise PermanentError(f"{self.a.where}: container {c.get('name')!r} has no command")
        workdir = substitute(str(c.get("workingDir") or ""), self.scope, where=self.a.where)
        cwd = self.files.cwd(workdir)  # the pod's / unless it names a working directory
        cwd.mkdir(parents=True, exist_ok=True)
        self.log.write(f"{ATTEMPT_HEADER}{self.a.node.attempts}: {' '.join(argv)}\n".encode())
        self.log.flush()
        out: Any = subprocess.PIPE if capture else self.log
        try:
            return self.ctx.procs.start(
                argv, cwd=cwd, env=self.environ(c), stdout=out, stderr=self.log
            )
        except OSError as e:  # no such command, not executable: the container cannot start
            raise CannotStart(
                f"container {c.get('name') or 'main'}: command {argv[0]!r} could not start: "
                f"{e.strerror} (local runs execute commands on this host)"
            ) from None

    def run(
        self, c: Mapping[str, Any], *, script: bool = False, deadline: float | None = None
    ) -> tuple[int | None, str]:
        """Run container ``c`` to its end: ``(exit code, result)`` (its standard output as
        ``outputs.result``); the exit code is None when ``deadline`` seconds passed first (the
        container is killed)."""
        proc = self.start(c, script=script, capture=True)
        chunks = bytearray()
        reader = threading.Thread(target=self._tee, args=(proc, chunks), daemon=True)
        reader.start()
        try:
            rc: int | None = proc.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            self.ctx.procs.kill(proc)  # a container's processes end with it: sweep them
            reader.join(timeout=5)
        return rc, _result(bytes(chunks))

    def _tee(self, proc: subprocess.Popen[bytes], tail: bytearray) -> None:
        """Copy the container's stdout to the log, keeping its end (one byte more than a
        result holds: the newline Argo trims first)."""
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            self.log.write(line)
            self.log.flush()
            tail += line
            if len(tail) > 2 * MAX_RESULT:
                del tail[: len(tail) - MAX_RESULT - 1]

    def place_inputs(self) -> None:
        """Put each input artifact at its path."""
        store = self.ctx.artifacts
        for spec in (self.a.template.get("inputs") or {}).get("artifacts") or []:
            source = self.a.artifacts.get(str(spec["name"]))
            if source is None or not spec.get("path"):
                continue
            dest = self.files.host(str(spec["path"]))
            dest.parent.mkdir(parents=True, exist_ok=True)
            kind, value = source
            if kind == "raw":
                dest.write_text(value)
            elif store is not None:
                store.load(value, dest)
            if spec.get("mode") is not None:
                dest.chmod(int(spec["mode"]))

    def outputs(self, rc: int, result: str, message: str = "") -> Outcome:
        """What a container that exited ``rc`` with ``result`` (what :meth:`run` returned)
        leaves: its output parameters and artifacts (when it succeeded), ``result`` and
        ``exitCode``."""
        if rc != 0:
            status, code = ("Error", 128 - rc) if rc < 0 else ("Failed", rc)
            return Outcome(status, code, message or f"exit code {code}", result=result)
        params: dict[str, str] = {}
        for p in (self.a.template.get("outputs") or {}).get("parameters") or []:
            vf = p.get("valueFrom") or {}
            path = self.files.host(str(vf.get("path", "")))
            # Argo trims one trailing newline off the value, a default's too (executor.go)
            if vf.get("path") and path.is_file():
                params[p["name"]] = _less_newline(path.read_bytes().decode(errors="replace"))
            elif "default" in vf:
                params[p["name"]] = _less_newline(str(vf["default"]))
            elif vf.get("path"):
                return Outcome(
                    "Error", 0, f"output parameter {p['name']}: {vf['path']} was not written"
                )
        try:
            artifacts = self._save_artifacts()
        except PermanentError as e:
            return Outcome("Error", 0, str(e), params, result)
        return Outcome("Succeeded", 0, "", params, result, artifacts)

    def _save_artifacts(self) -> dict[str, str]:
        out = {}
        store = self.ctx.artifacts
        for spec in (self.a.template.get("outputs") or {}).get("artifacts") or []:
            if not spec.get("path") or store is None:
                continue
            src = self.files.host(str(spec["path"]))
            nested = self.files.nested(str(spec["path"]))
            if not src.exists() and not nested:
                if spec.get("optional"):
                    continue
                raise PermanentError(
                    f"output artifact {spec['name']}: {spec['path']} was not written"
                )
            key = f"{self.ctx.workflow}/{self.a.key}/{spec['name']}"
            with tempfile.TemporaryDirectory(prefix="gangway-artifact-") as tmp:
                if nested:  # what the container sees there: the directory and what is in it
                    src = _assembled(src, nested, Path(tmp))
                out[str(spec["name"])] = store.save(src, key, spec.get("archive"))
        return out


def _less_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def _result(stdout: bytes) -> str:
    """``outputs.result``: standard output less one trailing newline, its last 256 KiB."""
    kept = stdout[:-1] if stdout.endswith(b"\n") else stdout
    return kept[-MAX_RESULT:].decode(errors="replace")


def _assembled(top: Path, nested: list[tuple[str, Path]], tmp: Path) -> Path:
    """A copy of directory ``top`` with each nested mount's files at its place in it."""
    dest = tmp / top.name
    if top.is_dir():
        shutil.copytree(top, dest, symlinks=True)
    dest.mkdir(parents=True, exist_ok=True)
    for rel, host in nested:
        if host.is_dir():
            shutil.copytree(host, dest / rel, symlinks=True, dirs_exist_ok=True)
    return dest


def open_pod(
    a: Attempt, ctx: RunContext, containers: list[Mapping[str, Any]], log: IO[bytes]
) -> Pod:
    """The pod of attempt ``a``, whose containers are ``containers`` (all of them: init,
    main, sidecars), with its volumes in place."""
    volumes: dict[str, Path] = {}
    for v in [*ctx.pod_volumes, *(a.template.get("volumes") or [])]:
        volumes[str(v["name"])] = _volume_dir(v, a, ctx)
    for name in ctx.claims:
        volumes.setdefault(name, _claim_dir(ctx, name))
    files = pod_files(a.template, a.scratch, volumes, containers)
    pod_name = safe_name(f"{ctx.workflow}-{a.node.name}")
    facts = {
        "metadata.name": pod_name,
        "metadata.namespace": "local",
        "status.podIP": "127.0.0.1",
        "spec.nodeName": "localhost",
    }
    return Pod(a, ctx, files, log, facts)


def _volume_dir(v: Mapping[str, Any], a: Attempt, ctx: RunContext) -> Path:
    name = str(v["name"])
    if "persistentVolumeClaim" in v:
        return _claim_dir(ctx, str((v["persistentVolumeClaim"] or {}).get("claimName", name)))
    if "secret" in v:
        return ctx.secrets.directory_of(str((v["secret"] or {}).get("secretName", name)))
    if "hostPath" in v:
        return Path(str((v["hostPath"] or {}).get("path", "/")))
    path = a.scratch / "volumes" / name  # emptyDir: the pod's own
    path.mkdir(parents=True, exist_ok=True)
    return path


def _claim_dir(ctx: RunContext, claim: str) -> Path:
    """A claim's volume: a directory of the run, shared by every step that mounts it."""
    root = ctx.volume_root or Path()
    path = root / safe_name(claim)
    path.mkdir(parents=True, exist_ok=True)
    return path
