"""What many tests share: the ``gangway`` command line run in process (as a user runs it, but
without paying a Python start-up per call) and as a real subprocess (for signals, process
groups and the installed entry point), and the repository's paths."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
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
