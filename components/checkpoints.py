"""Checkpoints: ``torch.distributed.checkpoint`` shards published under a step prefix.

Layout under a checkpoint root URI (keyed by workflow and step, never by pod or attempt)::

    ROOT/step-00000100/.metadata, __0_0.distcp, __1_0.distcp, ...   DCP files from every rank
    ROOT/step-00000100/rng/rank0.pt, rng/rank1.pt                    each rank's RNG state
    ROOT/step-00000100/gangway.json                                  model + training config
    ROOT/step-00000100/_manifest.json                                written last: the commit

Every rank stages its share in a local temporary directory and uploads it; rank 0 gathers the
entries and writes the manifest. A step without a manifest is incomplete and never loaded.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from gangway import storage

# Single-process use (evaluation, inference, 1-rank training) is intended, not a mistake.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")

__all__ = ["Checkpoint", "complete", "latest", "load", "prune", "save", "step_uri"]

_STEP_RE = re.compile(r"^step-(\d{8})/" + re.escape(storage.MANIFEST_NAME) + "$")
CONFIG_NAME = "gangway.json"


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its URI, training step and manifest metadata."""

    uri: str
    step: int
    digest: str
    metadata: dict[str, Any]


def step_uri(root: str, step: int) -> str:
    return storage.join(root, f"step-{step:08d}")


def _committed_steps(root: str) -> list[int]:
    """Steps whose manifest is listed under ``root``, oldest first (one listing)."""
    return sorted(
        int(m.group(1)) for o in storage.list_objects(root) if (m := _STEP_RE.match(o.key))
    )


def _at(root: str, step: int) -> Checkpoint | None:
    uri = step_uri(root, step)
    manifest = storage.read_manifest(uri)
    return None if manifest is None else Checkpoint(uri, step, manifest.digest, manifest.metadata)


def complete(root: str) -> list[Checkpoint]:
    """Every complete checkpoint under ``root``, oldest first."""
    return [ck for step in _committed_steps(root) if (ck := _at(root, step)) is not None]


def latest(root: str) -> Checkpoint | None:
    """The newest complete checkpoint, reading only its manifest (not every step's)."""
    for step in reversed(_committed_steps(root)):
        if (ck := _at(root, step)) is not None:
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
    """Load ``state`` in place from ``ckpt``; restore this rank's RNG state when present.

    Returns the checkpoint's saved config (model and training settings).
    """
    rank, _ = _rank_world()
    path = storage.local_view(ckpt.uri, cache_dir / f"rank{rank}")
    dcp_load(state, storage_reader=FileSystemReader(str(path)))
    rng = path / "rng" / f"rank{rank}.pt"
    if rng.is_file():
        _set_rng_state(torch.load(rng, weights_only=False))
    return read_config(path)


def read_config(path: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((path / CONFIG_NAME).read_text())
    return cfg


def prune(root: str, keep_last: int) -> list[int]:
    """Delete all but the newest ``keep_last`` complete checkpoints; returns deleted steps.

    The newest complete checkpoint is never deleted; incomplete steps are left alone (another
    writer may still be committing them).
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
