"""``GANGWAY_TEST_FAULT=KIND:RANK:STEP python -m tests.helpers.inject_fault TRAINING ARGS``: the
training component with one fault injected where the real one would strike, to test how it is
classed.

At optimizer step ``STEP`` of rank ``RANK`` the step raises what torch raises for ``KIND``
(``oom``: ``torch.OutOfMemoryError``; ``assert``: a device-side assert; ``nccl-timeout``: the
``DistBackendError`` NCCL's watchdog raises) or, for ``hang``, stops making progress outside
any collective, so its peers wait in theirs until the collective timeout. Everything else —
the loop, the classification, the exit code, the launcher — is the real code.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.distributed as dist

from components import _train_loop
from components.training import main
from gangway.step import main_wrapper

FAULTS: dict[str, Any] = {
    "oom": lambda: torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "139.72 GiB of which 1.21 GiB is free."
    ),
    "assert": lambda: RuntimeError(
        "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
        "reported at some other API call"
    ),
    "nccl-timeout": lambda: dist.DistBackendError(
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
        "OpType=ALLREDUCE) ran for 300000 milliseconds before timing out."
    ),
}


def _install(kind: str, rank: int, at: int) -> None:
    real = _train_loop.Trainer._step

    def step(self: Any, n: int) -> None:
        if self.ranks.rank == rank and n == at:
            if kind == "hang":
                while True:
                    time.sleep(1)
            raise FAULTS[kind]()
        real(self, n)

    _train_loop.Trainer._step = step  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    kind, rank, at = os.environ["GANGWAY_TEST_FAULT"].split(":")
    if kind not in {*FAULTS, "hang"}:
        raise SystemExit(f"GANGWAY_TEST_FAULT: KIND one of {[*FAULTS, 'hang']}")
    _install(kind, int(rank), int(at))
    main_wrapper(main)()
