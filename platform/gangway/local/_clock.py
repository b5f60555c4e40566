"""The clock a local run reads and sleeps by: injected, so tests need not wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SYSTEM_CLOCK", "Clock"]


@dataclass(frozen=True)
class Clock:
    """``now()`` in seconds (monotonic) and ``sleep(seconds)``.

    A test's clock may skip the sleeps (retry backoff) and fake durations; where the run waits
    on processes against a deadline (a gang's grace period), ``now`` should still advance
    with real time."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()
