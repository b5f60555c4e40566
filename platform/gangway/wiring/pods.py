"""Where a step's pod runs and how big it is: the ``pod=`` keyword of a step call.

    EVALUATE(corpus=..., pod=Pod(gpus=1, gpu_product=p.gpu_product, size_for=p.model))
    TRAIN(corpus=..., gpus_per_node=p.gpus_per_node, gpu_product=p.gpu_product,
          pod=Pod(size_for=p.model))

``size_for`` names the model preset the pod must hold — a preset name, or a parameter typed
``Literal[...]`` of preset names, in which case the pod is sized for the largest (the size is
in the compiled template, so it is decided when the pipeline compiles). The memory per preset
is the step's own (``StepSpec.memory_for``). A gang's pods hold ``procs_per_node`` processes
each: the memory is per process times that count (an Argo expression when the count is a
parameter: the Job's manifest is filled when the workflow runs).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.errors import PermanentError
from gangway.step.interface import StepSpec, unwrap_optional
from gangway.units import quantity
from gangway.wiring.refs import Ref

__all__ = ["Pod", "pod_requests"]


@dataclass(frozen=True)
class Pod:
    """A container step's GPUs (``gpus`` of ``gpu_product``: a ``nvidia.com/gpu.product``
    value or a parameter) and the model preset its memory is sized for."""

    gpus: int = 0
    gpu_product: Any = None
    size_for: Any = None


def _choices(value: Any, what: str, where: str) -> tuple[Any, ...]:
    """The values ``value`` may take: itself, or a ``Literal`` parameter's choices."""
    if not isinstance(value, Ref):
        return (value,)
    t = unwrap_optional(value.type)
    if typing.get_origin(t) is not typing.Literal:
        raise PermanentError(
            f"{where}: {what} takes a value or a parameter typed Literal[...] (the pod is sized "
            f"when the pipeline compiles, for the largest choice), not {value.source}"
        )
    return typing.get_args(t)


def pod_requests(
    spec: StepSpec, size_for: Any, *, procs: Any = 1, where: str
) -> Mapping[str, str] | None:
    """The CPU and memory requests of ``spec``'s pod sized for the preset(s) ``size_for``
    (None: the step's own requests)."""
    if size_for is None:
        return spec.requests
    table = spec.memory_for
    if not table:
        raise PermanentError(f"{where}: {spec.name} is not sized by model preset; drop size_for")
    presets = _choices(size_for, "size_for", where)
    unknown = [str(p) for p in presets if p not in table]
    if unknown:
        raise PermanentError(
            f"{where}: size_for: unknown model preset {unknown[0]!r}; choose from "
            f"{', '.join(table)}"
        )
    per_process = max((table[p] for p in presets), key=quantity)
    gib = int(quantity(per_process) / 2**30)
    base = dict(spec.requests or {"cpu": "1"})
    if isinstance(procs, Ref):  # the gang template's input of that name
        procs_expr = 'asInt(inputs.parameters["procs-per-node"])'
        return {**base, "memory": "{{=" + procs_expr + f" * {gib}}}}}Gi"}
    return {**base, "memory": f"{gib * int(procs)}Gi"}
