"""Run ``torchrun`` in a gang pod and map the gang's outcome onto the exit-code contract.

torchrun exits 1 whenever a worker fails or it is itself sent SIGTERM, which would read as a
permanent error. This launcher runs torchrun as a child, forwards SIGTERM/SIGINT to it, and
collects each worker's own exit code (workers write it to ``GANGWAY_EXIT_DIR``), then exits:

* 0 when torchrun succeeded;
* 143 when the pod was sent SIGTERM or any worker stopped for preemption;
* 75 when any worker hit a transient error, or died without reporting (killed by a signal);
* 1 otherwise (a permanent error in some worker).

    python -m gangway.step.launch --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d \\
        --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT -m components.training ...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from gangway.contract import (
    ENV_EXIT_DIR,
    EXIT_OK,
    EXIT_PERMANENT,
    EXIT_PREEMPTED,
    EXIT_TRANSIENT,
)

__all__ = ["config_errors", "count_problem", "gang_exit_code", "main"]


def gang_exit_code(
    torchrun_rc: int, worker_codes: Sequence[int], expected_workers: int, got_sigterm: bool
) -> int:
    """The pod's exit code from torchrun's, the workers' own codes, and whether we got SIGTERM."""
    if torchrun_rc == 0 and not got_sigterm:
        return EXIT_OK
    if got_sigterm or EXIT_PREEMPTED in worker_codes:
        return EXIT_PREEMPTED
    if EXIT_TRANSIENT in worker_codes or len(worker_codes) < expected_workers:
        return EXIT_TRANSIENT
    if any(c not in (EXIT_OK,) for c in worker_codes):
        return EXIT_PERMANENT
    return EXIT_TRANSIENT  # workers all succeeded but torchrun failed: agent/rendezvous trouble


def _flag(argv: Sequence[str], *names: str) -> str | None:
    """The value of a torchrun flag (``--x=v`` or ``--x v``), or None when absent."""
    for i, a in enumerate(argv):
        if a in ("-m", "--module") or not a.startswith("-"):
            break  # the training module's own arguments start here
        key, eq, value = a.partition("=")
        if key in names:
            if eq:
                return value
            return argv[i + 1] if i + 1 < len(argv) else ""
    return None


NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")
_NPROC_FLAGS = ("--nproc-per-node", "--nproc_per_node")


def count_problem(flag: str, value: str) -> str | None:
    """What is wrong with the value of torchrun's ``--nnodes`` or ``--nproc-per-node`` (None
    when it is fine, or for another flag): torchrun asserts on a count below 1, and an
    assertion reads as a lost peer."""
    flag = flag.replace("_", "-")
    if flag == "--nnodes":
        if all(p.isdigit() and int(p) > 0 for p in value.split(":")):
            return None
        return "must be a positive number of pods (or MIN:MAX)"
    if flag == "--nproc-per-node":
        if value in NPROC_WORDS or (value.isdigit() and int(value) > 0):
            return None
        return (
            f"must be a positive number of processes per pod (or one of {', '.join(NPROC_WORDS)})"
        )
    return None


def config_errors(argv: Sequence[str]) -> list[str]:
    """What is wrong with the gang's own settings (permanent: a restart cannot fix them)."""
    errors = []
    for flag, names in (("--nnodes", ("--nnodes",)), ("--nproc-per-node", _NPROC_FLAGS)):
        value = _flag(argv, *names)
        problem = None if value is None else count_problem(flag, value)
        if problem is not None:
            errors.append(f"{flag}={value!r}: {problem}")
    return errors


def _nproc(argv: Sequence[str]) -> int:
    value = _flag(argv, *_NPROC_FLAGS) or "1"
    return int(value) if value.isdigit() else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    errors = config_errors(args)
    if errors:  # torchrun would assert, and read as a lost peer (75): say what to fix instead
        for e in errors:
            print(f"error: gang settings are invalid: {e}", file=sys.stderr)
        return EXIT_PERMANENT
    got_sigterm = False
    with tempfile.TemporaryDirectory(prefix="gangway-exit-") as exit_dir:
        env = {**os.environ, ENV_EXIT_DIR: exit_dir}
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=env)

        def forward(signum: int, frame: FrameType | None) -> None:
            nonlocal got_sigterm
            got_sigterm = got_sigterm or signum == signal.SIGTERM
            proc.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        rc = proc.wait()
        codes = [int(p.read_text()) for p in Path(exit_dir).glob("rank-*")]
    code = gang_exit_code(rc, codes, _nproc(args), got_sigterm)
    if code != EXIT_OK:
        print(
            f"gangway launch: torchrun exited {rc}, workers {sorted(codes)} -> exit {code}",
            file=sys.stderr,
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
