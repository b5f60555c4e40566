"""Amounts and resource names, in one home: Kubernetes quantities as whole numbers (CPU in
millicores, memory in bytes, GPUs in devices), the names of the device resources a pod asks
for (GPUs, RDMA), the node label and taint that mark GPU nodes, the pod annotation that keeps
a node autoscaler from taking a gang's node away, and the quota keys the scheduling decisions
count by.

A quota key is ``cpu``, ``memory``, ``gpu`` (GPUs of every model together, as Volcano counts
``nvidia.com/gpu``) or ``gpu/MODEL`` (one model, as Gangway also checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

__all__ = [
    "DO_NOT_DISRUPT",
    "GPU_PRODUCT_LABEL",
    "GPU_RESOURCE",
    "GPU_TAINT",
    "IPC_LOCK",
    "MAX_AMOUNT",
    "RDMA_RESOURCES",
    "RDMA_RESOURCE_NAMES",
    "RDMA_RESOURCE_PREFIXES",
    "VOLCANO_KEYS",
    "amount",
    "amount_said",
    "is_rdma_resource",
    "memory_bytes",
    "millicores",
    "quantity",
    "quantity_or_zero",
    "quota_from_resource_list",
    "quota_key",
    "quota_keys",
    "quota_of",
    "resource_list",
]

VOLCANO_KEYS = ("cpu", "memory", "gpu")
"""What a Volcano Queue counts (``gpu`` is every model together): the reclaim rules see only
these; per-model keys are Gangway's own capability check."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource of an NVIDIA GPU (the device plugin's name), counted in devices."""
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""The node label GPU feature discovery publishes with the GPU model."""
GPU_TAINT = "nvidia.com/gpu"
"""The taint key of GPU nodes (``nvidia.com/gpu:NoSchedule``, as the GPU operator and the
managed Kubernetes services set it); only GPU pods tolerate it."""
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
"""The pod annotation (value ``"true"``) that stops Karpenter from consolidating, or replacing
for drift, the node a pod runs on: every gang pod carries it, since evicting one rank restarts
the whole gang."""

IPC_LOCK = "IPC_LOCK"
"""The one capability beyond Pod Security "restricted" a pod may add: in a gang pod, in a
container that has an RDMA device (ibverbs pins the memory it registers)."""
RDMA_RESOURCE_PREFIXES = ("rdma/",)
"""Device-plugin resources that hand a container an RDMA device: those of the
k8s-rdma-shared-dev-plugin (its default prefix, e.g. ``rdma/hca_shared_devices_a``; the NVIDIA
network operator deploys it with names such as ``rdma/rdma_shared_device_a``) ..."""
RDMA_RESOURCES = ("nvidia.com/hostdev",)
"""... and the NVIDIA network operator's host-device resource (SR-IOV device plugin). A
cluster naming its RDMA resources otherwise needs them added here."""
RDMA_RESOURCE_NAMES = (
    f"{', '.join(p + '*' for p in RDMA_RESOURCE_PREFIXES)}, {', '.join(RDMA_RESOURCES)}"
)
"""How a message names the RDMA resources."""


def is_rdma_resource(name: str) -> bool:
    """Whether the extended resource ``name`` is an RDMA device (:data:`RDMA_RESOURCES`)."""
    return name.startswith(RDMA_RESOURCE_PREFIXES) or name in RDMA_RESOURCES


MAX_AMOUNT = 2**48
"""Larger than any real amount on one node (281 TB, 2.8e11 cores); keeps sums over 30,000
nodes within 64 bits."""


def quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (``500m``, ``64Gi``, ``8``) as a number; ``ValueError`` if it is
    not one."""
    from kubernetes.utils import parse_quantity

    return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]


def quantity_or_zero(value: Any) -> Decimal:
    """What a manifest asks for, read leniently: a quantity that is not one counts as 0 (the
    schema check reports it; a decision must not crash on it)."""
    try:
        return quantity(str(value))
    except (ValueError, ArithmeticError):
        return Decimal(0)


def _whole(d: Decimal, what: str) -> int:
    if not d.is_finite():
        raise ValueError(f"{what} must be a finite amount")
    n = int(d.to_integral_value(ROUND_CEILING))
    if n > MAX_AMOUNT:
        raise ValueError(f"{what} {n} is larger than any real amount (at most {MAX_AMOUNT})")
    return n


def millicores(value: object) -> int:
    """A CPU quantity (``8``, ``500m``) in whole millicores, rounded up."""
    if isinstance(value, bool):
        raise ValueError("a CPU amount, not a boolean")
    if isinstance(value, str | int | float):
        return _whole(quantity(str(value)) * 1000, "CPU (millicores)")
    raise ValueError(f"{value!r} is not a CPU quantity (e.g. 8, 500m)")


def memory_bytes(value: object) -> int:
    """A memory quantity (``64Gi``) in whole bytes, rounded up."""
    if isinstance(value, bool):
        raise ValueError("a memory amount, not a boolean")
    if isinstance(value, str | int | float):
        return _whole(quantity(str(value)), "memory (bytes)")
    raise ValueError(f"{value!r} is not a memory quantity (e.g. 64Gi)")


def quota_key(gpu_type: str | None) -> str:
    """The quota key that counts GPUs of ``gpu_type`` (``gpu`` for all types together)."""
    return f"gpu/{gpu_type}" if gpu_type else "gpu"


def quota_keys(gpu_type: str | None, gpus: int) -> tuple[str, ...]:
    """The quota keys a pod shape counts against."""
    keys: tuple[str, ...] = ("cpu", "memory")
    if gpus:
        keys += ("gpu",) + ((quota_key(gpu_type),) if gpu_type else ())
    return keys


def quota_of(cpu: str | int | None, memory: str | None, gpus: Mapping[str, int]) -> dict[str, Any]:
    """An amount written as the platform config writes it (CPU and memory quantities, GPUs
    per model) as quota keys: ``cpu``, ``memory``, ``gpu`` (every model) and ``gpu/MODEL``."""
    out: dict[str, Any] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if gpus:
        out["gpu"] = sum(gpus.values())
        out.update({quota_key(t): n for t, n in gpus.items()})
    return out


def quota_from_resource_list(resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """A Kubernetes ResourceList (a Volcano Queue's) as quota keys (``nvidia.com/gpu`` →
    ``gpu``); other resources are left out."""
    names = {"cpu": "cpu", "memory": "memory", GPU_RESOURCE: "gpu"}
    out: dict[str, Any] = {}
    for k, v in (resources or {}).items():
        if k in names:
            out[names[k]] = int(float(str(v))) if names[k] == "gpu" else v
    return out


def resource_list(
    cpu: str | int | None, memory: str | None, gpus: Mapping[str, int]
) -> dict[str, str]:
    """An amount as a Kubernetes ResourceList: GPUs of every model add up to
    ``nvidia.com/gpu`` (Volcano's queues count them so)."""
    out = {k: str(v) for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if gpus:
        out[GPU_RESOURCE] = str(sum(gpus.values()))
    return out


def amount(key: str, n: int) -> str:
    """An amount of quota key ``key`` as a table cell under its key: cores (``0.5``), memory in
    ``Gi``/``Ti`` (three figures: ``3.73Gi``), devices."""
    if key == "cpu":
        return _figures(n / 1000)
    if key == "memory":
        return f"{_figures(n / 2**40)}Ti" if n >= 2**40 else f"{_figures(n / 2**30)}Gi"
    return str(n)


def amount_said(key: str, n: int) -> str:
    """The same in a sentence, with its unit: ``12 CPU cores``, ``3.73Gi of memory``,
    ``16 GPUs``, ``8 H100 GPUs``."""
    if key == "cpu":
        return f"{amount(key, n)} CPU core{'' if n == 1000 else 's'}"
    if key == "memory":
        return f"{amount(key, n)} of memory"
    model = key.partition("/")[2]
    return f"{n} {model + ' ' if model else ''}GPU{'' if n == 1 else 's'}"


def _figures(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:.3g}"
