"""Which device a step runs on, and how fast that device could go.

A step's pod says how many GPUs it was given in ``GANGWAY_GPUS`` (the pipeline sets it from the
same value as the ``nvidia.com/gpu`` limit). :func:`step_device` refuses to start when the pod
asked for GPUs and CUDA sees fewer — a missing driver, a device plugin that did not mount the
devices, a CPU build of torch — instead of training on one CPU core for hours.

:data:`PEAK_BF16_FLOPS` is the dense bf16 tensor-core peak of each GPU product, for MFU (model
FLOPs utilisation: the FLOPs the model needs per token × tokens/s ÷ that peak).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gangway.contract import ENV_GPUS
from gangway.errors import PermanentError

if TYPE_CHECKING:
    import torch

__all__ = ["ENV_GPUS", "PEAK_BF16_FLOPS", "peak_flops", "requested_gpus", "step_device"]

PEAK_BF16_FLOPS: dict[str, float] = {
    "B200": 2250e12,
    "H200": 989e12,
    "H100": 989e12,  # SXM; the PCIe and NVL cards are lower and are matched first below
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H200 NVL": 835e12,
    "H800": 989e12,
    "GH200": 989e12,
    "A100": 312e12,
    "A800": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10G": 70e12,
}
"""Dense (no sparsity) bf16 peak FLOP/s per GPU product, from the vendors' data sheets."""


def peak_flops(device_name: str) -> float | None:
    """The bf16 peak of the GPU ``torch.cuda.get_device_name()`` names (``NVIDIA H200``,
    ``NVIDIA-H100-80GB-HBM3`` as GPU feature discovery labels it), or None when unknown."""
    name = device_name.replace("-", " ").upper()
    for product in sorted(PEAK_BF16_FLOPS, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if all(part.upper() in name.split() for part in product.split()):
            return PEAK_BF16_FLOPS[product]
    return None


def requested_gpus() -> int:
    """How many GPUs this pod was given (``GANGWAY_GPUS``; 0 when unset)."""
    text = os.environ.get(ENV_GPUS, "").strip() or "0"
    try:
        n = int(text)
    except ValueError:
        raise PermanentError(f"{ENV_GPUS}={text!r}: give a whole number of GPUs") from None
    if n < 0:
        raise PermanentError(f"{ENV_GPUS}={text!r}: cannot be negative")
    return n


def step_device(local_rank: int = 0, local_world: int = 1) -> torch.device:
    """The device of this process: ``cuda:local_rank`` when CUDA is there, else the CPU.

    Refused (permanent, at once) when the pod requested GPUs and CUDA sees fewer, or when
    more processes than GPUs would share them."""
    import torch

    wanted = requested_gpus()
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if wanted and visible < wanted:
        why = (
            "this torch build has no CUDA support (a CPU image?)"
            if torch.version.cuda is None
            else "no GPU is visible (NVIDIA_VISIBLE_DEVICES="
            f"{os.environ.get('NVIDIA_VISIBLE_DEVICES', 'unset')})"
        )
        raise PermanentError(
            f"this pod requested {wanted} GPU(s) but CUDA sees {visible}: {why}. Check that "
            "the node's GPU device plugin is running and the image is the CUDA variant "
            "(docs/image.md); not running on the CPU instead"
        )
    if visible and wanted and local_world > wanted:
        raise PermanentError(
            f"{local_world} processes in this pod but {wanted} GPU(s): give procs-per-node "
            "equal to gpus-per-node (one GPU per process)"
        )
    if visible:
        return torch.device(f"cuda:{local_rank % visible}")
    return torch.device("cpu")
