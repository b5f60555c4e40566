"""What makes a pod a GPU pod: its GPU limit, the node selector on the GPU model that GPU
feature discovery labels nodes with, the toleration of the GPU nodes' taint, the
``GANGWAY_GPUS`` variable the step checks against what CUDA sees, and ``GANGWAY_GPU_MODEL``, the
product its metrics and usage are counted by.

A pod that names no GPU product is a CPU pod: it gets none of these, so it neither asks for
GPUs nor tolerates the taint that keeps CPU work off GPU nodes. GPUs without a product is a
compile error: a GPU pod that could land on any GPU model is a benchmark that means nothing
and a job that may not fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hera.workflows import models as m

from gangway.contract import ENV_GPU_MODEL, ENV_GPUS
from gangway.errors import PermanentError
from gangway.units import GPU_PRODUCT_LABEL, GPU_RESOURCE, GPU_TAINT

__all__ = ["GpuPods", "gpu_pods"]


@dataclass(frozen=True)
class GpuPods:
    """The GPU part of a pod spec (empty for a CPU pod)."""

    limits: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] | None = None
    tolerations: list[m.Toleration] | None = None
    env: list[m.EnvVar] = field(default_factory=list)

    def resources(self, requests: Mapping[str, str]) -> m.ResourceRequirements:
        """A container's resources: ``requests``, its memory as its limit too, and the GPUs."""
        return m.ResourceRequirements(
            requests={**requests, **self.limits},
            limits={"memory": requests["memory"], **self.limits},
        )


def gpu_pods(gpus: str | int, product: str | None, *, where: str) -> GpuPods:
    """The GPU fields of a pod with ``gpus`` GPUs (a number or an Argo placeholder) of
    ``product`` (a ``nvidia.com/gpu.product`` label value or a placeholder; None: a CPU pod)."""
    text = str(gpus).strip()
    if product is None:
        if text not in ("", "0"):
            raise PermanentError(
                f"{where}: {text} GPU(s) but no gpu_product: give the GPU model the pods need "
                f"(the {GPU_PRODUCT_LABEL} label of the nodes, e.g. gpu_product='NVIDIA-H200' "
                "or a pipeline parameter), or no GPUs for a CPU step"
            )
        return GpuPods()
    if text.lstrip("-").isdigit() and int(text) < 1:
        raise PermanentError(f"{where}: gpu_product={product!r} with {text} GPUs: give 1 or more")
    if not str(product).strip():
        raise PermanentError(f"{where}: gpu_product is empty: name the GPU model, e.g. NVIDIA-H200")
    return GpuPods(
        limits={GPU_RESOURCE: text},
        node_selector={GPU_PRODUCT_LABEL: str(product)},
        tolerations=[m.Toleration(key=GPU_TAINT, operator="Exists", effect="NoSchedule")],
        env=[m.EnvVar(name=ENV_GPUS, value=text), m.EnvVar(name=ENV_GPU_MODEL, value=str(product))],
    )
