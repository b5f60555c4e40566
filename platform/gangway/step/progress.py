"""A running step's progress, read from its metrics: step / total, tokens/s, ETA and the age of
its last checkpoint for training; items done / total and items/s for evaluation and inference.

The same reading serves the local live table (samples read from the run's metrics directory)
and ``gangway status`` on a cluster (samples from Prometheus): :func:`from_samples` is pure
over ``(name, labels, value)`` triples. The ETA is the training rank's own, computed at each
log window by :func:`eta_seconds` from that window's step time (not the whole run's, so it
recovers after a resume) plus the checkpoints still to save at the last save's cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "Progress",
    "Sample",
    "duration",
    "eta_seconds",
    "from_samples",
    "read_dir",
    "si",
]

Sample = tuple[str, Mapping[str, str], float]
"""A series' name, labels and value."""


def eta_seconds(
    done: int,
    target: int,
    step_seconds: float,
    *,
    checkpoint_every: int = 0,
    checkpoint_seconds: float = 0.0,
) -> float:
    """Seconds to ``target`` from ``done`` steps at ``step_seconds`` a step, with a checkpoint
    every ``checkpoint_every`` steps (and at the end) costing ``checkpoint_seconds`` each."""
    left = max(0, target - done)
    if not left:
        return 0.0
    saves = 0
    if checkpoint_every > 0:
        saves = target // checkpoint_every - done // checkpoint_every
        saves += 0 if target % checkpoint_every == 0 else 1
    return left * max(0.0, step_seconds) + saves * max(0.0, checkpoint_seconds)


@dataclass(frozen=True)
class Progress:
    """One step of one workflow, as its metrics say (None: not reported)."""

    workflow: str
    step: str
    done: int | None = None
    target: int | None = None
    tokens_per_s: float | None = None
    eta_s: float | None = None
    checkpoint_at: float | None = None
    """Unix time of the newest complete checkpoint."""
    items_done: float | None = None
    items_target: float | None = None
    items_per_s: float | None = None
    resumes: int = 0

    def line(self, now: float) -> str:
        """``step 41200/90000 · 1.9M tok/s · ETA 1d 4h · ckpt 6m ago`` (what is known)."""
        parts: list[str] = []
        if self.done is not None:
            parts.append(f"step {self.done:,}" + (f"/{self.target:,}" if self.target else ""))
        if self.tokens_per_s:
            parts.append(f"{si(self.tokens_per_s)} tok/s")
        if self.items_done is not None:
            of = f"/{self.items_target:,.0f}" if self.items_target else ""
            parts.append(f"{self.items_done:,.0f}{of} items")
        if self.items_per_s:
            parts.append(f"{si(self.items_per_s)} items/s")
        if self.eta_s is not None and self.target and (self.done or 0) < self.target:
            parts.append(f"ETA {duration(self.eta_s)}")
        if self.checkpoint_at:
            parts.append(f"ckpt {duration(max(0.0, now - self.checkpoint_at))} ago")
        if self.resumes:
            parts.append(f"resumed {self.resumes}×")
        return " · ".join(parts)


_FIELDS = {
    "gangway_train_target_steps": "target",
    "gangway_train_tokens_per_second": "tokens_per_s",
    "gangway_train_eta_seconds": "eta_s",
    "gangway_checkpoint_last_complete_time_seconds": "checkpoint_at",
    "gangway_items_processed_total": "items_done",
    "gangway_items_planned_total": "items_target",
    "gangway_items_per_second": "items_per_s",
    "gangway_train_resumes_total": "resumes",
}
_WHOLE = {"target", "resumes"}


def from_samples(samples: Iterable[Sample]) -> dict[tuple[str, str], Progress]:
    """Each (workflow, step)'s progress from its series; ``gangway_train_step`` is the most
    any rank has done (ranks step together; one behind is one not yet written)."""
    out: dict[tuple[str, str], Progress] = {}
    for name, labels, value in samples:
        key = (labels.get("workflow", ""), labels.get("step", ""))
        p = out.get(key) or Progress(*key)
        if name == "gangway_train_step":
            p = replace(p, done=max(int(value), p.done or 0))
        elif name in _FIELDS:
            field = _FIELDS[name]
            number: Any = int(value) if field in _WHOLE else float(value)
            p = replace(p, **{field: number})
        else:
            continue
        out[key] = p
    return out


def read_dir(directory: Path) -> dict[tuple[str, str], Progress]:
    """The progress in a run's metrics directory (``{}`` when it has none yet)."""
    if not directory.is_dir() or not any(directory.glob("*.db")):
        return {}
    from gangway.step.metrics import collect

    samples = [
        (s.name, s.labels, s.value)
        for family in collect(directory).collect()
        for s in family.samples
    ]
    return from_samples(samples)


def si(value: float) -> str:
    """``1.9M``, ``23.4k``, ``512``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def duration(seconds: float) -> str:
    """``1d 4h``, ``3h 12m``, ``6m``, ``42s``: two units at most."""
    s = round(seconds)
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m" if minutes >= 10 or not secs else f"{minutes}m {secs}s"
    return f"{secs}s"
