"""The clock a local run reads and sleeps by: injected, so tests need not wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SYSTEM_CLOCK", "Clock"]


@dataclass(frozen=True)
class Clock:
    """``now()`` in seconds (monotonic) and ``sleep(seconds)``."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()
