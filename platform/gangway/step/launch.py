"""Run ``torchrun`` in a gang pod and map the gang's outcome onto the exit-code contract.

torchrun exits 1 whenever a worker fails or it is itself sent SIGTERM, which would read as a
permanent error. This launcher runs torchrun as a child, forwards SIGTERM/SIGINT to it, and
collects each worker's own exit code (workers write it to ``GANGWAY_EXIT_DIR``), then exits:

* 0 when torchrun succeeded;
* 1 when any worker hit a permanent error (out of GPU memory, a device error, bad config):
  its peers then fail too, as lost peers, but restarting the gang would fail the same way;
* 143 when the pod was sent SIGTERM or any worker stopped for preemption;
* 75 when any worker hit a transient error, or died without reporting (killed by a signal).

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
from gangway.step.metrics import serve_pod
from gangway.step.torchrun import config_errors

__all__ = ["gang_exit_code", "main"]


def gang_exit_code(torchrun_rc: int, worker_codes: Sequence[int], got_sigterm: bool) -> int:
    """The pod's exit code from torchrun's, the workers' own codes, and whether we got SIGTERM."""
    if torchrun_rc == 0 and not got_sigterm:
        return EXIT_OK
    if any(c not in (EXIT_OK, EXIT_TRANSIENT, EXIT_PREEMPTED) for c in worker_codes):
        # The cause: the others' lost-peer errors, and a SIGTERM that came because this gang
        # was being torn down for it, are its consequences.
        return EXIT_PERMANENT
    if got_sigterm or EXIT_PREEMPTED in worker_codes:
        return EXIT_PREEMPTED
    # A transient error, a worker lost without reporting, or torchrun failing with every worker
    # done (agent or rendezvous trouble).
    return EXIT_TRANSIENT


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
    serve_pod()  # on a cluster: this pod's ranks' metrics, on the `metrics` port
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
    code = gang_exit_code(rc, codes, got_sigterm)
    if code != EXIT_OK:
        print(
            f"gangway launch: torchrun exited {rc}, workers {sorted(codes)} -> exit {code}",
            file=sys.stderr,
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
