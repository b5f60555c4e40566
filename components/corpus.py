"""Reading a staged byte-level corpus: memmapped splits and deterministic batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gangway import storage
from gangway.errors import PermanentError

__all__ = ["Corpus", "open_corpus", "train_batch", "val_batches"]

_FORMAT = "bytes-v1"


@dataclass(frozen=True)
class Corpus:
    """The two splits of a staged corpus and its ``meta.json``."""

    train: npt.NDArray[np.uint8]
    val: npt.NDArray[np.uint8]
    meta: dict[str, Any]

    @property
    def digest(self) -> str:
        return str(self.meta["digest"])


def open_corpus(uri: str, cache_dir: Path) -> Corpus:
    """Open the corpus published at ``uri`` (verified; fetched into ``cache_dir`` if remote)."""
    root = storage.local_view(uri, cache_dir)
    meta = json.loads((root / "meta.json").read_text())
    if meta.get("format") != _FORMAT:
        raise PermanentError(
            f"{uri}: corpus format {meta.get('format')!r}, expected {_FORMAT!r}; re-run staging"
        )
    splits = {n: np.memmap(root / f"{n}.bin", dtype=np.uint8, mode="r") for n in ("train", "val")}
    return Corpus(train=splits["train"], val=splits["val"], meta=meta)


def train_batch(
    data: npt.NDArray[np.uint8], *, seed: int, step: int, rank: int, batch_size: int, block: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The batch for (seed, step, rank): a pure function, so a resumed run sees the same data."""
    if len(data) <= block + 1:
        raise PermanentError(f"training split has {len(data)} tokens, fewer than block_size+2")
    rng = np.random.default_rng([seed, step, rank])
    starts = rng.integers(0, len(data) - block - 1, size=batch_size)
    x = np.stack([data[s : s + block] for s in starts]).astype(np.int64)
    y = np.stack([data[s + 1 : s + 1 + block] for s in starts]).astype(np.int64)
    return x, y


def val_batches(
    data: npt.NDArray[np.uint8], *, block: int, batch_size: int, max_tokens: int
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Consecutive non-overlapping windows from the start of the validation split."""
    n = min((len(data) - 1) // block, max(1, max_tokens // block))
    if n < 1:
        raise PermanentError(f"validation split has {len(data)} tokens, fewer than block_size+1")
    for i in range(0, n, batch_size):
        idx = range(i, min(n, i + batch_size))
        x = np.stack([data[j * block : (j + 1) * block] for j in idx]).astype(np.int64)
        y = np.stack([data[j * block + 1 : (j + 1) * block + 1] for j in idx]).astype(np.int64)
        yield x, y
