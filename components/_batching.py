"""Batch inference over documents of different lengths: scoring and greedy continuation.

The model has learned positions and no padding mask, so a batch holds windows of one length:
documents are grouped by the length of each window (scoring) or of the prompt (generation),
and each group runs ``batch_size`` at a time. Results are per document, in input order, and
the same as one document at a time (up to floating-point summation order).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from components.model import GPT

__all__ = ["continue_documents", "score_documents"]

MAX_SCORED_BLOCKS = 8
"""A document is scored on at most this many context windows (its opening)."""


def _windows(data: bytes, block: int) -> list[tuple[int, int]]:
    """``(start, length)`` of the scoring windows over ``data``'s first bytes."""
    n = min(len(data), MAX_SCORED_BLOCKS * block + 1)
    return [(s, min(block, n - 1 - s)) for s in range(0, n - 1, block)]


def score_documents(
    model: GPT, texts: Sequence[bytes], batch_size: int
) -> list[tuple[float | None, int]]:
    """Each document's mean next-byte loss (nats) and the bytes it was scored on; ``None``
    for a document shorter than two bytes."""
    device = next(model.parameters()).device
    by_length: dict[int, list[tuple[int, int]]] = defaultdict(list)  # length → (doc, start)
    for i, data in enumerate(texts):
        for start, length in _windows(data, model.cfg.block_size):
            by_length[length].append((i, start))
    totals = torch.zeros(len(texts), dtype=torch.float64, device=device)
    counts = [0] * len(texts)
    for length, items in by_length.items():
        for k in range(0, len(items), batch_size):
            chunk = items[k : k + batch_size]
            ids = torch.tensor(
                [list(texts[i][s : s + length + 1]) for i, s in chunk], dtype=torch.long
            ).to(device)
            logits = model(ids[:, :-1]).float()
            losses = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none"
            ).view(len(chunk), length)
            index = torch.tensor([i for i, _ in chunk], device=device)
            totals.index_add_(0, index, losses.sum(dim=1).double())
            for i, _ in chunk:
                counts[i] += length
    sums = totals.tolist()  # the one host sync
    return [(s / c if c else None, c) for s, c in zip(sums, counts, strict=True)]


def continue_documents(
    model: GPT, prompts: Sequence[bytes], max_new_tokens: int, batch_size: int
) -> list[bytes]:
    """The greedy continuation of each prompt, ``max_new_tokens`` bytes long."""
    device = next(model.parameters()).device
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        by_length[len(p)].append(i)
    out: list[bytes] = [b""] * len(prompts)
    for length, members in by_length.items():
        for k in range(0, len(members), batch_size):
            chunk = members[k : k + batch_size]
            ids = torch.tensor([list(prompts[i]) for i in chunk], dtype=torch.long).to(device)
            tokens = model.generate(ids, max_new_tokens)[:, length:].tolist()
            for i, row in zip(chunk, tokens, strict=True):
                out[i] = bytes(row)
    return out
