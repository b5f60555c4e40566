"""What a Volcano Job asks the scheduler for — pods, their requests, queue, priority class, GPU
model, topology — and the placement written back onto it (``networkTopology``, the GPU
model's node selector)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from gangway.units import GPU_PRODUCT_LABEL, GPU_RESOURCE, quantity_or_zero

__all__ = [
    "JobDemand",
    "job_demand",
    "place_manifest",
    "pod_requests",
    "with_placement",
]


@dataclass(frozen=True)
class JobDemand:
    pods: int
    cpu_millis: int
    memory: int
    gpus: int
    gpus_whole: bool
    """Whether every pod asks for a whole number of GPUs (Kubernetes allows nothing else)."""
    queue: str | None
    priority_class: str | None
    gpu_product: str | None
    highest_tier: int | None
    """``networkTopology.highestTierAllowed`` in ``hard`` mode (Volcano's default); a ``soft``
    tier is a preference, not a constraint, and is left out."""
    soft_topology: bool
    """The Job has a ``soft`` ``networkTopology`` (see :attr:`highest_tier` for ``hard``)."""
    namespace: str | None


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int, Decimal]:
    """CPU (millicores), memory (bytes) and GPUs a pod spec requests: the sum over its
    containers (limits where a request is absent, as Kubernetes defaults them)."""
    cpu = mem = gpu = Decimal(0)
    for c in pod.get("containers") or []:
        res = c.get("resources") or {}
        want = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        cpu += quantity_or_zero(want.get("cpu", 0)) * 1000
        mem += quantity_or_zero(want.get("memory", 0))
        gpu += quantity_or_zero(want.get(GPU_RESOURCE, 0))
    up = ROUND_CEILING
    return int(cpu.to_integral_value(up)), int(mem.to_integral_value(up)), gpu


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def job_demand(job: Mapping[str, Any]) -> JobDemand:
    """The demand of a Job manifest. Pods: ``minAvailable`` (the whole gang, which Gangway's
    jobs equal to their pod count), else the sum of the tasks' replicas; each pod sized as the
    largest of the tasks' pods, resource by resource."""
    spec = job.get("spec") or {}
    tasks = spec.get("tasks") or []
    pods = _int(spec.get("minAvailable")) or sum(_int(t.get("replicas")) or 0 for t in tasks)
    shapes = [pod_requests((t.get("template") or {}).get("spec") or {}) for t in tasks] or [
        (0, 0, Decimal(0))
    ]
    selectors = [
        ((t.get("template") or {}).get("spec") or {}).get("nodeSelector") or {} for t in tasks
    ]
    product = next((s[GPU_PRODUCT_LABEL] for s in selectors if GPU_PRODUCT_LABEL in s), None)
    topology = spec.get("networkTopology") or {}
    return JobDemand(
        pods=pods,
        cpu_millis=max(s[0] for s in shapes),
        memory=max(s[1] for s in shapes),
        gpus=int(max(s[2] for s in shapes)),
        gpus_whole=all(s[2] == s[2].to_integral_value() for s in shapes),
        queue=spec.get("queue") or None,
        priority_class=spec.get("priorityClassName") or None,
        gpu_product=str(product) if product else None,
        highest_tier=_int(topology.get("highestTierAllowed"))
        if topology.get("mode", "hard") == "hard"
        else None,
        soft_topology=bool(topology) and topology.get("mode", "hard") != "hard",
        namespace=(job.get("metadata") or {}).get("namespace"),
    )


def with_placement(
    job: Mapping[str, Any], *, tier: int | None, hard: bool, gpu_product: str | None
) -> dict[str, Any]:
    """A copy of ``job`` kept within topology ``tier`` (``networkTopology``: hard mode never
    spans wider; soft mode prefers to stay within) and on nodes of ``gpu_product``."""
    out = copy.deepcopy(dict(job))
    spec = out.setdefault("spec", {})
    if tier is not None:
        spec["networkTopology"] = {"mode": "hard" if hard else "soft", "highestTierAllowed": tier}
    if gpu_product:
        for t in spec.get("tasks") or []:
            pod = t.setdefault("template", {}).setdefault("spec", {})
            pod.setdefault("nodeSelector", {})[GPU_PRODUCT_LABEL] = gpu_product
    return out


def place_manifest(text: str, *, tier: int | None, hard: bool, gpu_product: str | None) -> str:
    """:func:`with_placement` on a Job manifest as an Argo resource template holds it: YAML
    text with ``{{…}}`` placeholders, unquoted where they stand for a count. The placeholders
    come back verbatim, counts unquoted, as :meth:`VolcanoJob.to_yaml` writes them."""
    import secrets

    import yaml

    from gangway.argo.substitution import PLACEHOLDER
    from gangway.user_yaml import load_yaml
    from gangway.volcano.gang import is_job
    from gangway.volcano.job import unquote_counts

    salt = secrets.token_hex(4)
    bodies = list(dict.fromkeys(m.group(0) for m in PLACEHOLDER.finditer(text)))
    token = {b: f"gwplace{i}x{salt}" for i, b in enumerate(bodies)}
    probes = {p: b for b, p in token.items()}
    protected = PLACEHOLDER.sub(lambda m: token[m.group(0)], text)
    try:
        raw = load_yaml(protected)
    except yaml.YAMLError as e:
        from gangway.errors import PermanentError
        from gangway.user_yaml import yaml_problem

        raise PermanentError(f"its manifest is not YAML: {yaml_problem(e)}") from None
    if not is_job(raw):
        return text  # another kind of resource: nothing to place
    job = with_placement(raw, tier=tier, hard=hard, gpu_product=gpu_product)

    def back(node: Any) -> Any:
        if isinstance(node, str):
            for p, b in probes.items():
                node = node.replace(p, b)
            return node
        if isinstance(node, list):
            return [back(v) for v in node]
        if isinstance(node, dict):
            return {back(k): back(v) for k, v in node.items()}
        return node

    return unquote_counts(yaml.safe_dump(back(job), sort_keys=False, width=1000))
