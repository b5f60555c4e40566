"""What many tests share — the one place test code is shared from (a test module never imports
another): the ``gangway`` command line run in process (as a user runs it, without a Python
start-up per call) and as a real subprocess (for signals, process groups and the installed
entry point), whole pipeline runs (the suite's shared reference runs among them), a step
module run as a step would be, and the repository's paths. Servers on loopback are in
:mod:`tests.helpers.servers`, builders of test objects in :mod:`tests.helpers.builders`,
runners of workflows and gangs in :mod:`tests.helpers.runs`."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]


def beside_pipelines(kind: str, tmp_path: Path) -> Path:
    """A scratch pipeline file in the repository's ``pipelines/`` (so it imports as the
    reference pipelines do), named so that no two tests — on any xdist worker — share it:
    every worker numbers its ``tmp_path`` folders alike, so the worker's name goes in too."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return REPO / "pipelines" / f"_{kind}_{worker}_{tmp_path.name}.py"


GANGWAY = [sys.executable, "-c", "from gangway.cli import main; main()"]
"""The installed CLI as a process: ``subprocess.run([*GANGWAY, "run", …])``."""


class Output(Protocol):
    """What a command printed and how it exited: a :class:`Ran` or a ``CompletedProcess``."""

    @property
    def returncode(self) -> int: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


@dataclass(frozen=True)
class Ran:
    """What a command printed and how it exited, as :class:`subprocess.CompletedProcess`
    reports it (``returncode``, ``stdout``, ``stderr``)."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def cli(*args: str, cwd: Path = REPO, env: Mapping[str, str | None] | None = None) -> Ran:
    """``gangway ARGS`` in this process, through the console script's own entry point
    (:func:`gangway.cli.main`: a user error is one ``error:`` line and its exit code). ``env``
    changes the environment for the call (None removes a variable); output is as in a pipe at
    160 columns. Use :func:`cli_process` where signals or a real process matter."""
    from gangway.cli import main

    runner = CliRunner()
    settings = {"COLUMNS": "160", **(env or {})}
    with _cwd(cwd), runner.isolation(env=settings) as (out, err, _):
        code = 0
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return Ran(code, stdout, stderr)


def gangway(*args: str, cwd: Path = REPO, env: Mapping[str, str] | None = None) -> Ran:
    """:func:`cli`, with ``env`` (when given) as the whole environment, as a process gets it:
    variables it leaves out are unset for the call."""
    if env is None:
        return cli(*args, cwd=cwd)
    changes: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    changes.update(env)
    return cli(*args, cwd=cwd, env=changes)


def cli_process(
    *args: str, cwd: Path = REPO, env: Mapping[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``gangway ARGS`` as a separate process (``env`` replaces the environment when given)."""
    return subprocess.run(
        [*GANGWAY, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
        env={**(os.environ if env is None else env), "COLUMNS": "160"},
    )


@dataclass(frozen=True)
class PipelineRun:
    """One ``gangway run`` of a pipeline: what it printed, and the workflow it ran."""

    out: Ran
    name: str
    uid: str


def pipeline_run(*args: str) -> PipelineRun:
    """``gangway run ARGS`` in process; it must succeed. Its workflow's name and uid are read
    from the summary it prints (``lineage: … workflow:NAME`` and ``run: …/UID``)."""
    res = cli("run", *args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    lines = res.stdout.splitlines()
    name = next(x for x in lines if x.startswith("lineage: ")).split("workflow:", 1)[1].split()[0]
    uid = next(x for x in lines if x.startswith("run: ")).rsplit("/", 1)[1].strip()
    return PipelineRun(res, name, uid)


class LoopbackProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` (``host:port``): :meth:`down` closes
    it — the port refuses connections and open ones are cut, as a server that went away does
    — and :meth:`up` opens it again on the same port. An outage without restarting a
    server."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        import socket

        self.upstream = upstream
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = int(probe.getsockname()[1])
        probe.close()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        import socket
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        import contextlib
        import socket

        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in self._open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self._open.clear()

    def _accept(self, listener: Any) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: down()
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: Any, dst: Any) -> None:
        import contextlib
        import socket

        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def gang_only(corpus: str, values: Mapping[str, str]) -> dict[str, Any]:
    """The reference pipeline's training gang alone (its compiled ``train`` template, with the
    workflow's parameters ``values``), reading an already staged ``corpus``: what fault
    injection needs, without staging, evaluation and inference around it."""
    from gangway.local import workflow_from_template
    from gangway.workflows.compiler import compile_pipeline

    wt = copy.deepcopy(compile_pipeline(REPO / "pipelines" / "train_eval_infer.py"))
    spec = wt["spec"]
    (train,) = [t for t in spec["templates"] if t["name"] == "train"]
    main = next(t for t in spec["templates"] if t["name"] == "main")
    (task,) = [t for t in main["dag"]["tasks"] if t["name"] == "train"]
    for p in task["arguments"]["parameters"]:
        if p["name"] == "corpus":
            p["value"] = corpus
    for key in ("depends", "dependencies"):
        task.pop(key, None)
    spec["templates"] = [{"name": "main", "dag": {"tasks": [task]}}, train]
    spec.pop("onExit", None)
    return workflow_from_template(wt, dict(values))


def run_module(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ARGS`` as a step would, capturing output."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        check=False,
    )


@dataclass(frozen=True)
class ReferenceRuns:
    """The reference pipeline run twice in one state dir, on the same data (its MLflow store,
    sqlite, in it): the second finds staging and evaluation cached and trains again."""

    state: Path
    first: PipelineRun
    second: PipelineRun
    args: tuple[str, ...]

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.state}/mlflow.db"


REFERENCE_ARGS = (
    *("-p", "train-steps=20", "-p", "checkpoint-every=10", "-p", "shards=2"),
    *("--parallelism", "2"),
)
"""Checkpoints at steps 10 and 20 (the second better: a regression to find), two inference
shards (a fan-out), a gang of two pods."""


def copy_state(runs: ReferenceRuns, to: Path) -> Path:
    """A copy of the reference runs' state dir, for a test that changes it (its MLflow store's
    records still point at the shared run's checkpoints, which it only reads)."""
    import shutil

    shutil.copytree(runs.state, to, ignore=shutil.ignore_patterns("*.lock"))
    return to


def gangway_without_argo_env(*args: str, env: dict[str, str] | None = None) -> Ran:
    """The CLI in process, with no ``ARGO_*`` from the environment (``env`` adds some)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ARGO_")}
    return cli(*args, env={**unset, **(env or {})})
