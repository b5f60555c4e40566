"""Checkpoints: ``torch.distributed.checkpoint`` shards published under a step prefix.

Layout under a checkpoint root URI (keyed by workflow and step, never by pod or attempt)::

    ROOT/step-00000100/.metadata, __0_0.distcp, __1_0.distcp, ...   DCP files from every rank
    ROOT/step-00000100/rng/rank0.pt, rng/rank1.pt                    each rank's RNG state
    ROOT/step-00000100/gangway.json                                  model + training config
    ROOT/step-00000100/_manifest.json                                written last: the commit
    ROOT/corrupt/step-00000100-20261202T133632Z/...                  set aside: never loaded

Every rank stages its share in a local temporary directory and uploads it; rank 0 gathers the
entries and writes the manifest. A step without a manifest is incomplete and never loaded.

Loading is two phases, so that a gang can agree on a checkpoint before any collective:
:func:`open_checkpoint` verifies every file against the manifest and reads the config and this
rank's RNG state (rank-local), :func:`restore_state` loads the DCP files (a collective in a
gang). Either raises :class:`UnusableCheckpoint` for a checkpoint that cannot be used; one that
training skipped is moved under ``ROOT/corrupt/`` (:func:`components._resume.set_aside`, with a
note saying why), where :func:`latest`, :func:`complete` and :func:`prune` do not look and no
new checkpoint can collide with it.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from components.failures import classify, first_line, unwrap
from gangway import storage
from gangway.errors import PermanentError

# Single-process use (evaluation, inference, 1-rank training) is intended, not a mistake.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")

__all__ = [
    "Checkpoint",
    "Opened",
    "UnusableCheckpoint",
    "at",
    "committed_steps",
    "complete",
    "latest",
    "load",
    "open_checkpoint",
    "prune",
    "restore_rng",
    "restore_state",
    "save",
    "step_uri",
]

_STEP_RE = re.compile(r"^step-(\d{8})/" + re.escape(storage.MANIFEST_NAME) + "$")
CONFIG_NAME = "gangway.json"
T = TypeVar("T")


class UnusableCheckpoint(PermanentError):
    """A checkpoint that cannot be used: a file missing or not matching its manifest's sha256,
    a malformed manifest, or a file its reader cannot parse. The message names it and why."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its URI, training step and manifest metadata."""

    uri: str
    step: int
    digest: str
    metadata: dict[str, Any]


def step_uri(root: str, step: int) -> str:
    return storage.join(root, f"step-{step:08d}")


def committed_steps(root: str) -> list[int]:
    """Steps whose manifest is listed under ``root``, oldest first (one listing)."""
    return sorted(
        int(m.group(1)) for o in storage.list_objects(root) if (m := _STEP_RE.match(o.key))
    )


def at(root: str, step: int) -> Checkpoint | None:
    """The complete checkpoint of ``step`` under ``root``; None when it has no manifest.

    Raises :class:`UnusableCheckpoint` when its manifest is malformed."""
    uri = step_uri(root, step)
    try:
        manifest = storage.read_manifest(uri)
    except PermanentError as e:  # a transient storage error propagates: a retry may read it
        raise UnusableCheckpoint(str(e)) from e
    return None if manifest is None else Checkpoint(uri, step, manifest.digest, manifest.metadata)


def complete(root: str) -> list[Checkpoint]:
    """Every complete checkpoint under ``root``, oldest first."""
    return [ck for step in committed_steps(root) if (ck := at(root, step)) is not None]


def latest(root: str) -> Checkpoint | None:
    """The newest complete checkpoint, reading only its manifest (not every step's)."""
    for step in reversed(committed_steps(root)):
        if (ck := at(root, step)) is not None:
            return ck
    return None


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def save(
    root: str,
    step: int,
    state: dict[str, Any],
    *,
    config: dict[str, Any],
    metadata: dict[str, Any],
) -> Checkpoint:
    """Save ``state`` at ``step`` from every rank (a collective call) and commit it.

    Returns the existing checkpoint unchanged when ``step`` is already complete (a retry).
    """
    uri = step_uri(root, step)
    rank, world = _rank_world()
    existing = storage.read_manifest(uri)
    if existing is not None:
        return Checkpoint(uri, step, existing.digest, existing.metadata)
    loc = storage.parse(root)
    # For file:// roots, stage beside the checkpoints (a hidden temporary) so that publishing
    # is a rename, not a second copy of every byte.
    near = loc.path if loc.scheme == "file" else None
    with storage.os_errors("write", near or Path(tempfile.gettempdir())):
        if near is not None:
            near.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".step-{step:08d}.tmp-r{rank}-", dir=near))
    try:
        # Two files per rank, so hashing them for the manifest (and on restore) runs in parallel.
        dcp_save(state, storage_writer=FileSystemWriter(str(stage), thread_count=2))
        _canonical_metadata(stage / ".metadata")
        (stage / "rng").mkdir()
        buf = io.BytesIO()
        torch.save(_rng_state(), buf)
        (stage / "rng" / f"rank{rank}.pt").write_bytes(buf.getvalue())
        if rank == 0:
            (stage / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True))
        parts = storage.upload_parts(stage, uri, move=near is not None)
        gathered: list[dict[str, Any]] = [{} for _ in range(world)]
        if world > 1:
            dist.all_gather_object(gathered, parts)
        else:
            gathered = [parts]
        files = {k: v for part in gathered for k, v in part.items()}
        meta = {**metadata, "step": step, "world_size": world}
        digest = ""
        if rank == 0:
            digest = storage.commit_manifest(uri, files, meta).digest
        if world > 1:
            dist.barrier()
        return Checkpoint(
            uri,
            step,
            digest or storage.listing_digest({k: v["sha256"] for k, v in files.items()}),
            meta,
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _canonical_metadata(path: Path) -> None:
    """Rewrite DCP's ``.metadata`` so that the same state saved twice is the same bytes: drop
    what it records of one save (its staging path and a random save id, never read when
    loading) and order the storage index (it follows the order the ranks' writes finished).
    An unchanged checkpoint then has an unchanged digest, so evaluating it again is a cache
    hit."""
    if not path.is_file():  # only the coordinating rank writes it
        return
    with path.open("rb") as f:
        meta = pickle.load(f)
    if hasattr(meta, "storage_meta"):
        meta.storage_meta = None
    data = getattr(meta, "storage_data", None)
    if isinstance(data, dict):
        meta.storage_data = dict(
            sorted(
                data.items(),
                key=lambda kv: (kv[0].fqn, tuple(kv[0].offset or ()), kv[0].index or 0),
            )
        )
    with path.open("wb") as f:
        pickle.dump(meta, f)


def load(ckpt: Checkpoint, state: dict[str, Any], cache_dir: Path) -> dict[str, Any]:
    """Load ``state`` in place from ``ckpt`` (a collective in a gang); restore this rank's RNG
    state when present. Raises :class:`UnusableCheckpoint` when it cannot be used.

    Returns the checkpoint's saved config (model and training settings).
    """
    opened = open_checkpoint(ckpt, cache_dir)
    restore_state(opened, state)
    restore_rng(opened)
    return opened.config


@dataclass(frozen=True)
class Opened:
    """A checkpoint verified against its manifest in a local directory, with its config and
    this rank's RNG state read: what :func:`restore_state` and :func:`restore_rng` need."""

    checkpoint: Checkpoint
    path: Path
    config: dict[str, Any]
    rng: dict[str, Any] | None  # None: saved by a gang without this rank


def open_checkpoint(ckpt: Checkpoint, cache_dir: Path) -> Opened:
    """Verify every file of ``ckpt`` against its manifest (fetching an ``s3://`` one into
    ``cache_dir``) and read its config and this rank's RNG state. Rank-local: no collective.

    Raises :class:`UnusableCheckpoint` when a file is missing, does not match its sha256 or
    cannot be parsed; a transient storage error propagates (a retry may read it).
    """
    rank, _ = _rank_world()
    try:
        path = storage.local_view(ckpt.uri, cache_dir / f"rank{rank}")
    except PermanentError as e:
        raise UnusableCheckpoint(str(e) if ckpt.uri in str(e) else f"{ckpt.uri}: {e}") from e
    rng = f"rng/rank{rank}.pt"
    return Opened(
        ckpt,
        path,
        _parsed(ckpt.uri, path, CONFIG_NAME, _read_config_file),
        _parsed(ckpt.uri, path, rng, _read_rng) if (path / rng).is_file() else None,
    )


def restore_state(opened: Opened, state: dict[str, Any]) -> None:
    """Load ``state`` in place from the DCP files of ``opened`` (a collective in a gang: DCP
    raises on every rank when one fails). Raises :class:`UnusableCheckpoint` when DCP cannot
    read them; a failure :func:`~components.failures.classify` knows (a lost peer, say) or an
    I/O error propagates as it is, since the files may be fine."""
    try:
        dcp_load(state, storage_reader=FileSystemReader(str(opened.path)))
    except CheckpointException as e:
        inner, uri = unwrap(e), opened.checkpoint.uri
        known = classify(inner, where=f"loading {uri}", distributed=_rank_world()[1] > 1)
        if isinstance(inner, OSError) or known is not None:
            raise
        raise UnusableCheckpoint(
            f"{uri}: torch.distributed.checkpoint cannot read it "
            f"({type(inner).__name__}: {first_line(inner)})"
        ) from e


def restore_rng(opened: Opened) -> None:
    """Restore this rank's RNG state from ``opened``, when it holds one for this rank."""
    if opened.rng is not None:
        _set_rng_state(opened.rng)


def read_config(path: Path) -> dict[str, Any]:
    """The config a checkpoint was saved with (``gangway.json`` in its local directory)."""
    return _read_config_file(path / CONFIG_NAME)


def _read_config_file(path: Path) -> dict[str, Any]:
    cfg = json.loads(path.read_text())
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
        raise ValueError("not an object with the model's settings")
    return cfg


def _read_rng(path: Path) -> dict[str, Any]:
    rng = torch.load(path, weights_only=False)
    if not isinstance(rng, dict) or "torch" not in rng:
        raise ValueError("not a saved RNG state")
    return rng


def _parsed(uri: str, root: Path, rel: str, read: Callable[[Path], T]) -> T:
    """``read(root / rel)``, or :class:`UnusableCheckpoint` naming ``rel`` when it fails (the
    bytes matched the manifest, so they were saved that way: a retry reads the same)."""
    try:
        return read(root / rel)
    except (FileNotFoundError, ValueError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        raise UnusableCheckpoint(
            f"{uri}: {rel} cannot be read ({type(e).__name__}: {first_line(e)})"
        ) from e


def prune(root: str, keep_last: int) -> list[int]:
    """Delete all but the newest ``keep_last`` complete checkpoints; returns deleted steps.

    The newest complete checkpoint is never deleted; incomplete steps are left alone (another
    writer may still be committing them), and so is everything under ``ROOT/corrupt/``.
    """
    found = complete(root)
    doomed = found[: max(0, len(found) - max(1, keep_last))]
    for ck in doomed:
        # Remove the manifest first: a half-deleted checkpoint must look incomplete.
        storage.delete(storage.join(ck.uri, storage.MANIFEST_NAME))
        storage.delete(ck.uri)
    return [ck.step for ck in doomed]


def _rng_state() -> dict[str, Any]:
    import random

    import numpy as np

    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def _set_rng_state(state: dict[str, Any]) -> None:
    import random

    import numpy as np

    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
