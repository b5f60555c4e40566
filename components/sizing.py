"""What a model preset needs: its parameter count, FLOPs per token, and the memory of a pod
that loads it. Torch-free, so a pipeline compiles (and sizes its pods) without importing torch.

The counts follow :class:`components.model.GPT` exactly (a test compares them with the real
module): per block ``12·C² + 13·C`` parameters (attention qkv and projection, the 4× MLP, two
LayerNorms), plus token and position embeddings (the output head is tied to the token
embedding) and the final LayerNorm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = [
    "MODEL_PRESETS",
    "eval_memory_gib",
    "flops_per_token",
    "param_count",
    "train_memory_gib",
]

MODEL_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"block_size": 128, "n_layer": 2, "n_head": 4, "n_embd": 128},
    "small": {"block_size": 256, "n_layer": 4, "n_head": 8, "n_embd": 256},
    "gpu": {"block_size": 1024, "n_layer": 24, "n_head": 16, "n_embd": 1536},
}
"""Model shapes by preset name: ``tiny`` trains in about a minute on 2 CPU cores; ``gpu``
(~682 M parameters) keeps one large GPU busy."""

VOCAB = 256
RUNTIME_GIB = 1.5
"""What a Python process with torch imported and a corpus loaded holds besides the model."""


def _shape(shape: Mapping[str, int]) -> tuple[int, int, int, int]:
    return (
        int(shape.get("vocab_size", VOCAB)),
        int(shape["block_size"]),
        int(shape["n_layer"]),
        int(shape["n_embd"]),
    )


def param_count(shape: Mapping[str, int], *, embeddings: bool = True) -> int:
    """Parameters of the model of ``shape``; ``embeddings=False`` leaves out the position
    embedding (the part with no matmul FLOPs; the token embedding is the tied output head)."""
    vocab, block, layers, c = _shape(shape)
    per_block = 12 * c * c + 13 * c
    return vocab * c + (block * c if embeddings else 0) + layers * per_block + 2 * c


def flops_per_token(shape: Mapping[str, int]) -> float:
    """Training FLOPs (forward and backward) per token: ``6·N`` for the weights' matmuls plus
    ``12·L·C·T`` for attention over a full context (the PaLM paper's appendix B accounting)."""
    _, block, layers, c = _shape(shape)
    return 6.0 * param_count(shape, embeddings=False) + 12.0 * layers * c * block


def _gib(n_bytes: float) -> int:
    return max(1, math.ceil(n_bytes / 2**30 + RUNTIME_GIB))


def eval_memory_gib(shape: Mapping[str, int]) -> int:
    """Host memory (GiB) of a pod that loads the model for evaluation or inference: the fp32
    weights twice (the module and the checkpoint's read buffers) plus the runtime."""
    return _gib(2 * 4 * param_count(shape))


def train_memory_gib(shape: Mapping[str, int]) -> int:
    """Host memory (GiB) of one training process: the checkpoint's model and AdamW state
    (fp32 weights and two moments) staged through host memory while it is written."""
    return _gib(3 * 4 * param_count(shape))
