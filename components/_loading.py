"""Loading a trained model from a checkpoint for evaluation and inference (single process)."""

from __future__ import annotations

from pathlib import Path

from components import checkpoints
from components.model import GPT, ModelConfig
from gangway import storage
from gangway.errors import NotFoundError, PermanentError

__all__ = ["checkpoint_at", "load_model"]


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


def load_model(ckpt: checkpoints.Checkpoint, cache_dir: Path) -> GPT:
    """Rebuild the model from the checkpoint's own config and load its weights (eval mode)."""
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

    path = storage.local_view(ckpt.uri, cache_dir / "ckpt")
    cfg = ModelConfig.model_validate(checkpoints.read_config(path)["model"])
    model = GPT(cfg)
    state = {"model": model.state_dict()}
    dcp_load(state, storage_reader=FileSystemReader(str(path)))
    model.load_state_dict(state["model"])
    model.eval()
    return model
