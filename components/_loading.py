"""Loading a trained model from a checkpoint for evaluation and inference (single process),
on the step's device, and running it there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from components import checkpoints
from components.model import GPT, ModelConfig
from gangway import storage
from gangway.errors import NotFoundError, PermanentError

if TYPE_CHECKING:
    import torch

__all__ = ["checkpoint_at", "inference_mode", "load_model"]


def checkpoint_at(uri: str) -> checkpoints.Checkpoint:
    """The complete checkpoint at ``uri`` (a ``.../step-NNNNNNNN`` prefix)."""
    manifest = storage.read_manifest(uri)
    if manifest is None:
        raise NotFoundError(
            f"{uri}: no complete checkpoint here (no {storage.MANIFEST_NAME}); "
            "list complete ones with `gangway ls CHECKPOINT_ROOT`"
        )
    if "step" not in manifest.metadata:
        raise PermanentError(f"{uri}: published directory is not a training checkpoint")
    return checkpoints.Checkpoint(
        uri, int(manifest.metadata["step"]), manifest.digest, manifest.metadata
    )


def load_model(
    ckpt: checkpoints.Checkpoint, cache_dir: Path, device: torch.device | None = None
) -> GPT:
    """Rebuild the model from the checkpoint's own config and load its weights onto
    ``device`` (default: the CPU), in eval mode. A checkpoint saved from GPUs loads on the CPU
    and the other way round: the files hold no device."""
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

    path = storage.local_view(ckpt.uri, cache_dir / "ckpt")
    cfg = ModelConfig.model_validate(checkpoints.read_config(path)["model"])
    model = GPT(cfg) if device is None else GPT(cfg).to(device)
    state = {"model": model.state_dict()}
    dcp_load(state, storage_reader=FileSystemReader(str(path)))
    model.load_state_dict(state["model"])
    model.eval()
    return model


@contextlib.contextmanager
def inference_mode(device: torch.device, *, where: str, batch_size: int) -> Iterator[None]:
    """No gradients, bf16 autocast on a GPU, and a GPU failure named for what it is
    (:func:`components.failures.classify`: out of memory or a device error, permanent)."""
    import torch

    from components.failures import classify

    try:
        with (
            torch.no_grad(),
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"),
        ):
            yield
    except RuntimeError as e:
        err = classify(e, where=where, batch_size=batch_size)
        if err is None:
            raise
        raise err from e
