"""A small GPT-style byte-level language model; its size is set by :class:`ModelConfig`.

Pre-norm transformer blocks with causal self-attention (``scaled_dot_product_attention``),
learned positions, tied input/output embeddings, no dropout (so training is deterministic for a
given seed and data order). Presets: ``tiny`` trains in about a minute on 2 CPU cores; ``gpu``
keeps one large GPU busy.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn
from torch.nn import functional as F  # noqa: N812

from components.sizing import MODEL_PRESETS, flops_per_token, param_count

__all__ = ["GPT", "ModelConfig"]


class ModelConfig(BaseModel):
    """Transformer shape. ``n_embd`` must be divisible by ``n_head``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int = Field(256, ge=2)
    block_size: int = Field(128, ge=2, description="context length in tokens")
    n_layer: int = Field(2, ge=1)
    n_head: int = Field(4, ge=1)
    n_embd: int = Field(128, ge=8)

    PRESETS: ClassVar[dict[str, dict[str, int]]] = MODEL_PRESETS

    def param_count(self) -> int:
        return param_count(self.model_dump())

    def flops_per_token(self) -> float:
        """Training FLOPs per token (:func:`components.sizing.flops_per_token`), for MFU."""
        return flops_per_token(self.model_dump())

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelConfig:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        return self


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class GPT(nn.Module):
    """Decoder-only transformer over bytes."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, vocab) for token ids of shape (batch, time)."""
        t = idx.shape[1]
        if t > self.cfg.block_size:
            raise ValueError(f"sequence of {t} tokens exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln_f(x))
        return logits

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy continuation of ``idx`` (batch, time) by ``max_new_tokens`` tokens."""
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.cfg.block_size :])
            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
        return idx
