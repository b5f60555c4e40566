"""Resuming a training run: the newest checkpoint that every rank of the gang can load, past
any that cannot be used, which are set aside (kept, never deleted) so that a retry does not
meet them again.

The policy (``docs/storage-and-checkpoints.md``, "Resuming past an unusable checkpoint"):

1. Try the complete checkpoints newest first. A checkpoint is *unusable* when a file is
   missing or does not match its manifest's sha256, its manifest is malformed, DCP cannot read
   its files, or its ``gangway.json`` or a rank's RNG file cannot be parsed. Skip it and try
   the next. Older ones are not read once one loads.
2. The gang decides together: rank 0 lists the steps and every rank gets its list; for each
   step every rank verifies its own view (an ``s3://`` one is fetched into each rank's cache)
   and the ranks compare verdicts before any collective load. One rank's failure skips the
   checkpoint for all, so the ranks always resume from the same step, whatever one of them saw.
3. Once one loads, move each skipped one to ``ROOT/corrupt/`` (:func:`set_aside`), where
   ``latest()``, ``complete()`` and ``prune()`` do not look, so the steps this run trains
   again can be checkpointed again without meeting it.
4. If none is usable, fail for good (exit 1), naming every one and why, and set none aside:
   silently training again from step 0 would spend the compute the checkpoints stood for, and
   a cause that spoils them all (a wrong root, a storage fault) is better looked at than buried.
   Moving them away (or a new ``--checkpoints`` root) starts from scratch on purpose.

Not unusable, and so never a reason to fall back: a transient storage error (it propagates,
exit 75, and the retry reads the same checkpoint) and a checkpoint of another model shape than
the run's (a permanent error at once: the run's settings changed, not the checkpoint).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import torch.distributed as dist

from components import checkpoints
from components._ranks import Ranks
from gangway import storage
from gangway.errors import PermanentError, TransientError

__all__ = [
    "NOTE_NAME",
    "SET_ASIDE_DIR",
    "ResumePlan",
    "Skipped",
    "agreed",
    "plan_resume",
    "resume",
    "set_aside",
]

SET_ASIDE_DIR = "corrupt"
"""Where :func:`set_aside` moves a checkpoint that training could not use (under the root)."""
NOTE_NAME = "_corrupt.json"
"""The note :func:`set_aside` leaves in a set-aside checkpoint: its old URI, when, and why."""
T = TypeVar("T")


@dataclass(frozen=True)
class Skipped:
    """A checkpoint that was not resumed from: its step, URI, why, and (once moved) where it
    was set aside."""

    step: int
    uri: str
    why: str
    set_aside: str = ""


@dataclass(frozen=True)
class ResumePlan:
    """Where a run resumes (None: from scratch, there was no checkpoint) and the newer
    checkpoints it skipped, newest first."""

    chosen: checkpoints.Checkpoint | None
    skipped: tuple[Skipped, ...] = ()


def plan_resume(
    root: str, steps: Sequence[int], attempt: Callable[[int], checkpoints.Checkpoint | Skipped]
) -> ResumePlan:
    """Rules 1 and 4: ``attempt`` each of ``steps`` newest first until one loads; raise a
    :class:`PermanentError` naming each when none does. With no steps, start from scratch."""
    skipped: list[Skipped] = []
    for step in sorted(steps, reverse=True):
        got = attempt(step)
        if isinstance(got, checkpoints.Checkpoint):
            return ResumePlan(got, tuple(skipped))
        skipped.append(got)
    if skipped:
        raise PermanentError(
            f"none of the {len(skipped)} checkpoint(s) under {root} can be resumed from, so "
            "training stops rather than start again from step 0: "
            + "; ".join(s.why for s in skipped)
            + ". They are left in place. To train from scratch on purpose, move them out of "
            "the root or give --checkpoints a new one"
        )
    return ResumePlan(None)


def agreed(reasons: Sequence[str | None]) -> str | None:
    """Rule 2: the gang's verdict from each rank's (None: that rank can use the checkpoint).
    Unusable when any rank says so: the reason alone when every rank gave it, else each
    failing rank's, named."""
    failed = [(rank, why) for rank, why in enumerate(reasons) if why is not None]
    if not failed:
        return None
    if len(failed) == len(reasons) and len({why for _, why in failed}) == 1:
        return failed[0][1]
    return "; ".join(f"rank {rank}: {why}" for rank, why in failed)


def resume(
    root: str,
    state: dict[str, Any],
    *,
    ranks: Ranks,
    model: dict[str, Any],
    cache: Path,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ResumePlan:
    """Load ``state`` in place from the newest checkpoint under ``root`` that every rank can
    use, restore this rank's RNG state from it and set aside the newer ones it skipped (see
    the module's policy). Collective; every rank returns the same plan.

    ``model`` is the run's model settings: a checkpoint saved with others is refused."""
    gang = _Gang(ranks)
    steps = gang.from_rank0(lambda: checkpoints.committed_steps(root))

    def attempt(step: int) -> checkpoints.Checkpoint | Skipped:
        opened = _open(root, step, model, cache)
        why = gang.agree(opened if isinstance(opened, str) else None)
        if why is None and not isinstance(opened, str):
            why = gang.agree(_restored(opened, state))
            if why is None:
                checkpoints.restore_rng(opened)
                return opened.checkpoint
        assert why is not None  # a rank that could not open it gave a reason
        return Skipped(step, checkpoints.step_uri(root, step), why)

    found = plan_resume(root, steps, attempt)

    def set_skipped_aside() -> ResumePlan:
        moved = (
            Skipped(s.step, s.uri, s.why, set_aside(root, s.step, s.why, now=now()))
            for s in found.skipped
        )
        return ResumePlan(found.chosen, tuple(moved))

    return gang.from_rank0(set_skipped_aside) if found.skipped else found


def _open(root: str, step: int, model: dict[str, Any], cache: Path) -> checkpoints.Opened | str:
    """This rank's view of the checkpoint of ``step``, or why it is unusable (rank-local)."""
    try:
        ckpt = checkpoints.at(root, step)
        if ckpt is None:
            return f"{checkpoints.step_uri(root, step)}: its manifest is gone"
        opened = checkpoints.open_checkpoint(ckpt, cache)
    except checkpoints.UnusableCheckpoint as e:
        return str(e)
    saved = opened.config["model"]
    if saved != model:
        differ = sorted(k for k in {*saved, *model} if saved.get(k) != model.get(k))
        raise PermanentError(
            f"{ckpt.uri} was saved by a model with other settings than this run's ("
            + ", ".join(f"{k}: {saved.get(k)} there, {model.get(k)} here" for k in differ)
            + "), so it cannot be resumed: train with the settings it was saved with, or into "
            "a new --checkpoints root"
        )
    return opened


def _restored(opened: checkpoints.Opened, state: dict[str, Any]) -> str | None:
    """Load the DCP files of ``opened`` into ``state`` (a collective); why not, if not."""
    try:
        checkpoints.restore_state(opened, state)
    except checkpoints.UnusableCheckpoint as e:
        return str(e)
    return None


class _Gang:
    """The two collectives resuming needs, on the default process group (no-ops alone)."""

    def __init__(self, ranks: Ranks) -> None:
        self.ranks = ranks

    def agree(self, why: str | None) -> str | None:
        """Every rank's verdict, combined (:func:`agreed`): the same on every rank."""
        if not self.ranks.distributed:
            return why
        reasons: list[str | None] = [None] * self.ranks.world
        dist.all_gather_object(reasons, why)
        return agreed(reasons)

    def from_rank0(self, compute: Callable[[], T]) -> T:
        """``compute()`` on rank 0, its result on every rank (if rank 0 fails, its peers
        wait in the broadcast and fail as lost peers, for good if rank 0 failed for good)."""
        if not self.ranks.distributed:
            return compute()
        box: list[Any] = [compute() if self.ranks.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        result: T = box[0]
        return result


def set_aside(root: str, step: int, why: str, *, now: datetime) -> str:
    """Move the checkpoint of ``step`` to ``ROOT/corrupt/step-NNNNNNNN-<UTC time>/``, with a
    note (:data:`NOTE_NAME`) saying why; returns its new URI. Never deletes a byte of it.

    There ``latest()``, ``complete()`` and ``prune()`` no longer see it, and the step can be
    saved again. A ``file://`` move is one rename; elsewhere (``s3://`` has no rename) every
    object is copied, the copy checked against the original's listing, the note written, and
    only then the original removed, manifest first: a move interrupted before that leaves the
    original in place (and is done again by the next run that meets it).
    """
    uri = checkpoints.step_uri(root, step)
    aside = _free_aside_uri(root, step, now)
    loc = storage.parse(uri)
    if loc.scheme == "file":
        dst = storage.parse(aside).path
        with storage.os_errors("write", dst):
            dst.parent.mkdir(parents=True, exist_ok=True)
            loc.path.rename(dst)
    else:
        _copy_tree(uri, aside)
    note = {"checkpoint": uri, "step": step, "why": why, "set_aside_at": now.isoformat()}
    storage.write_json(storage.join(aside, NOTE_NAME), note)
    if loc.scheme != "file":
        storage.delete(storage.join(uri, storage.MANIFEST_NAME))
        storage.delete(uri)
    return aside


def _free_aside_uri(root: str, step: int, now: datetime) -> str:
    """A fresh ``ROOT/corrupt/step-NNNNNNNN-<UTC time>`` (``-2``, ``-3``… if it is taken)."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = storage.join(root, SET_ASIDE_DIR, f"step-{step:08d}-{stamp}")
    uri, n = base, 1
    while storage.list_objects(uri):
        n += 1
        uri = f"{base}-{n}"
    return uri


def _copy_tree(src: str, dst: str, workers: int = 8) -> None:
    """Copy every object under ``src`` to ``dst`` as it is (no verification: it may be
    corrupt), through one local temporary file at a time per worker, and check the copy's
    listing against the original's."""
    objects = storage.list_objects(src)
    with tempfile.TemporaryDirectory(prefix="gangway-set-aside-") as tmp:

        def one(key: str) -> None:
            local = Path(tmp) / key
            storage.download_file(storage.join(src, key), local)
            storage.upload_file(local, storage.join(dst, key))
            local.unlink()

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, [o.key for o in objects]))
    if {(o.key, o.size) for o in storage.list_objects(dst)} != {(o.key, o.size) for o in objects}:
        raise TransientError(f"copying {src} to {dst} came out incomplete; the original is kept")
