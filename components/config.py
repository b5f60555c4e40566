"""Training configuration: a preset name or a JSON/YAML file, plus ``--set key=value`` overrides.

Every error names its field, all at once, e.g.
``training config: steps: Input should be greater than or equal to 1 (got 0)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from components.model import ModelConfig
from gangway.errors import PermanentError
from gangway.user_yaml import load_yaml

__all__ = ["TRAIN_PRESETS", "TrainConfig", "load_config"]

TRAIN_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"batch_size": 16, "lr": 3e-3, "warmup_steps": 20, "checkpoint_every": 50},
    "small": {
        "batch_size": 16,
        "lr": 1e-3,
        "warmup_steps": 50,
        "checkpoint_every": 100,
        "keep_last": 5,
    },
    "gpu": {
        "batch_size": 32,
        "lr": 3e-4,
        "warmup_steps": 200,
        "checkpoint_every": 500,
        "keep_last": 3,  # 8.2 GB each (fp32 weights and both AdamW moments)
        "log_every": 50,
    },
}
"""Training settings that follow the model preset (anything given explicitly wins): a
682 M-parameter model wants a lower learning rate, a longer warm-up and fewer, pruned
checkpoints than a 0.4 M one."""


class TrainConfig(BaseModel):
    """How to train. ``batch_size`` is per rank; ``steps`` counts optimizer steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelConfig = Field(default_factory=lambda: ModelConfig(**ModelConfig.PRESETS["tiny"]))
    steps: int = Field(300, ge=1)
    batch_size: int = Field(16, ge=1)
    lr: float = Field(3e-3, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_steps: int = Field(20, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    checkpoint_every: int = Field(50, ge=1, description="save a checkpoint every K steps")
    keep_last: int = Field(0, ge=0, description="prune to the newest N checkpoints (0: keep all)")
    seed: int = 0
    log_every: int = Field(10, ge=1)
    bf16: bool = Field(True, description="bf16 autocast on GPU (ignored on CPU)")
    grad_accum: int = Field(
        1, ge=1, description="micro-batches per optimizer step (gradients synced on the last)"
    )
    compile: bool | None = Field(
        None, description="torch.compile the model (default: on GPU only; needs a C compiler)"
    )

    @field_validator("model", mode="before")
    @classmethod
    def _preset(cls, v: Any) -> Any:
        """``model: tiny`` or ``model: {preset: tiny, n_layer: 4}`` expand a preset."""
        if isinstance(v, str):
            v = {"preset": v}
        if isinstance(v, Mapping) and "preset" in v:
            name = v["preset"]
            if name not in ModelConfig.PRESETS:
                raise ValueError(
                    f"unknown preset {name!r}; choose from {sorted(ModelConfig.PRESETS)}"
                )
            v = {**ModelConfig.PRESETS[name], **{k: x for k, x in v.items() if k != "preset"}}
        return v


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for p in parts[:-1]:
        child = node.get(p)
        if isinstance(child, str):  # a preset name being refined: model=tiny, model.n_layer=4
            child = {"preset": child}
        node[p] = child if isinstance(child, dict) else {}
        node = node[p]
    node[parts[-1]] = value


def _preset_of(raw: Mapping[str, Any]) -> str | None:
    model = raw.get("model", "tiny")
    name = model.get("preset") if isinstance(model, Mapping) else model
    return name if isinstance(name, str) and name in TRAIN_PRESETS else None


def load_config(source: str | None, overrides: Mapping[str, str] | None = None) -> TrainConfig:
    """Build a :class:`TrainConfig` from a preset name or file and ``key=value`` overrides.

    ``source`` is ``None`` (defaults), a model preset (``tiny``, ``small``, ``gpu``), or a path
    to a JSON/YAML file. Override values are parsed as YAML scalars (``steps=200``,
    ``bf16=false``) and dotted keys reach into the model (``model.n_layer=4``). Settings not
    given come from the model preset's :data:`TRAIN_PRESETS`, then the field defaults.
    """
    raw: dict[str, Any] = {}
    if source in ModelConfig.PRESETS:
        raw = {"model": source}
    elif source:
        path = Path(source)
        if not path.is_file():
            raise PermanentError(
                f"--config {source!r}: no such file and not a preset "
                f"({', '.join(sorted(ModelConfig.PRESETS))})"
            )
        try:
            loaded = load_yaml(path.read_text())
        except yaml.YAMLError as e:
            raise PermanentError(f"{source}: not valid YAML/JSON: {e}") from None
        if not isinstance(loaded, dict):
            raise PermanentError(f"{source}: expected a mapping of settings at the top level")
        raw = loaded
    for key, text in (overrides or {}).items():
        try:
            value = load_yaml(text) if text else text
        except yaml.YAMLError:
            value = text
        _set_dotted(raw, key, value)
    preset = _preset_of(raw)
    if preset is not None:
        raw = {**TRAIN_PRESETS[preset], **raw}
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as e:
        lines = [
            f"  {'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            + (f" (got {err['input']!r})" if not isinstance(err["input"], dict) else "")
            for err in e.errors()
        ]
        raise PermanentError(
            "training config is invalid:\n" + "\n".join(lines) + "\nfix these settings and re-run"
        ) from None
