"""Platform rules: whole gangs that no node autoscaler disrupts, GPUs on GPU nodes (and only
GPU pods there), Pod Security "restricted" with its one exception for RDMA gang pods, secrets
by reference. Each check cites the rule it implements; ``docs/gpu-clusters.md`` records the GPU
and RDMA decisions, ``docs/capacity.md`` the disruption ones."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gangway.errors import FieldError
from gangway.lint._findings import finding
from gangway.step.torchrun import count_problem
from gangway.units import (
    DO_NOT_DISRUPT,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GPU_TAINT,
    IPC_LOCK,
    RDMA_RESOURCE_NAMES,
    is_rdma_resource,
)
from gangway.volcano.gang import gang_problems

if TYPE_CHECKING:
    from gangway.config import PlatformConfig

__all__ = [
    "check_do_not_disrupt",
    "check_gang",
    "check_launch",
    "check_pod",
    "check_pod_fields",
    "known_gpu_products",
]

GPU = GPU_RESOURCE
_SECRETISH = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)
_IPC_LOCK_NOTE = (
    "IPC_LOCK: allowed for an RDMA gang pod, but Pod Security restricted refuses it where it is "
    "enforced (Gangway's team namespaces are), and a non-root process does not get it on "
    "containerd or CRI-O; what NCCL over RDMA needs is the node's memlock limit raised "
    "(docs/gpu-clusters.md)"
)


def known_gpu_products(cfg: PlatformConfig) -> frozenset[str]:
    """The ``nvidia.com/gpu.product`` values of the config's GPUs: each cluster's GPU types
    through its ``gpu_products`` (a type without an entry is labelled with its own name)."""
    return frozenset(
        c.gpu_products.get(t, t) for c in cfg.clusters.values() for t in [*c.gpus, *c.gpu_products]
    )


def check_gang(job: Mapping[str, Any], name: str) -> list[FieldError]:
    """Gang rule: minAvailable equals the pod count, so the whole gang is admitted or none
    (:func:`gangway.volcano.gang_problems`)."""
    return [finding(name, path, message) for path, message in gang_problems(job)]


def check_do_not_disrupt(job: Mapping[str, Any], name: str) -> list[FieldError]:
    """Gang rule: every pod of a gang carries ``karpenter.sh/do-not-disrupt: "true"``, so
    Karpenter's consolidation and drift never evict one rank (which restarts the whole gang
    and loses the work since its checkpoint); ``docs/capacity.md``."""
    out = []
    tasks = (job.get("spec") or {}).get("tasks") or []
    for i, task in enumerate(t for t in tasks if isinstance(t, Mapping)):
        meta = (task.get("template") or {}).get("metadata") or {}
        value = (meta.get("annotations") or {}).get(DO_NOT_DISRUPT)
        if str(value).lower() != "true":
            said = "missing" if value is None else f"is {value!r}"
            out.append(
                finding(
                    name,
                    f"spec.tasks[{i}].template.metadata.annotations.{DO_NOT_DISRUPT}",
                    f'{said}: set it to "true" so that Karpenter never consolidates or '
                    "replaces a node under one rank of the gang (gang_step sets it)",
                )
            )
    return out


def check_launch(container: Mapping[str, Any], path: str, name: str) -> list[FieldError]:
    """Gang rule: the torchrun counts a gang pod starts with are positive (torchrun asserts
    otherwise, and an assertion reads as a lost peer, so the gang would restart in vain);
    the launcher's own rule (:func:`gangway.step.torchrun.count_problem`)."""
    out = []
    command = list(container.get("command") or [])
    for i, arg in enumerate(str(a) for a in [*command, *(container.get("args") or [])]):
        key, _, value = arg.partition("=")
        problem = None if "$(" in value else count_problem(key, value)
        if problem is not None:
            field, index = ("command", i) if i < len(command) else ("args", i - len(command))
            out.append(finding(name, f"{path}.{field}[{index}]", f"{arg}: {problem}"))
    return out


def _int(v: Any) -> int:
    try:
        return int(str(v))
    except ValueError:
        return 1  # a placeholder: assume it may ask for GPUs


def check_pod(
    containers: list[Mapping[str, Any]],
    pod: Mapping[str, Any],
    path: str,
    name: str,
    container_paths: list[str],
    *,
    gang: bool = False,
    gpu_products: Collection[str] = (),
) -> list[FieldError]:
    """Pod Security "restricted", GPU placement and secrets-by-reference for one pod, as it
    will be submitted (its values filled in).

    ``gang``: the pod is one of a Volcano Job's, which may add IPC_LOCK for RDMA;
    ``gpu_products``: the ``nvidia.com/gpu.product`` values the platform config knows."""
    out: list[FieldError] = []
    pod_sc = pod.get("securityContext") or {}
    for c, cpath in zip(containers, container_paths, strict=True):
        out += list(_restricted(c, pod_sc, cpath, name, gang=gang))
        out += list(_secrets(c, cpath, name))
        out += list(_negative_resources(c, cpath, name))
    gpus = _gpu_quantities([*containers, *(pod.get("initContainers") or [])])
    out += list(_gpu_product(gpus, pod, path, name, gpu_products))
    out += list(_gpu_taint(gpus, pod, path, name))
    out += list(check_pod_fields(pod, path, name))
    return out


def check_pod_fields(pod: Mapping[str, Any], path: str, name: str) -> Iterator[FieldError]:
    """Pod Security "restricted" on the pod's own fields: no hostPath volume, no host
    network, PID or IPC namespace."""
    for i, v in enumerate(pod.get("volumes") or []):
        if isinstance(v, Mapping) and "hostPath" in v:
            yield finding(
                name,
                f"{path}.volumes[{i}].hostPath",
                "hostPath volumes are not allowed (Pod Security restricted); use emptyDir or a PVC",
            )
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            yield finding(name, f"{path}.{key}", "not allowed (Pod Security restricted)")


def _gpu_quantities(containers: list[Mapping[str, Any]]) -> list[str]:
    """The ``nvidia.com/gpu`` limit and request of each container (``0`` where unset)."""
    return [
        str(((c.get("resources") or {}).get(kind) or {}).get(GPU, 0))
        for c in containers
        for kind in ("limits", "requests")
    ]


def _wants_gpus(quantities: list[str]) -> bool:
    """Some container certainly asks for GPUs (a placeholder is not counted)."""
    return any("{{" not in q and _int(q) > 0 for q in quantities)


def _gpu_product(
    quantities: list[str], pod: Mapping[str, Any], path: str, name: str, known: Collection[str]
) -> Iterator[FieldError]:
    """GPU placement: a GPU pod selects its GPU type by the label GPU feature discovery puts
    on GPU nodes; the value names a product (an empty one matches no node; one the platform
    config does not know may be a typo, or a cluster the config does not describe)."""
    selector = pod.get("nodeSelector") or {}
    wants = _wants_gpus(quantities)
    if GPU_PRODUCT_LABEL not in selector:
        if wants:
            yield finding(
                name,
                f"{path}.nodeSelector",
                f"requests {GPU} but does not select "
                f"a GPU type; add nodeSelector {GPU_PRODUCT_LABEL}: <model>",
            )
        return
    raw = selector[GPU_PRODUCT_LABEL]
    value = "" if raw is None else str(raw)
    where = f"{path}.nodeSelector.{GPU_PRODUCT_LABEL}"
    products = ", ".join(sorted(known))
    if not value.strip():
        fix = f"name the GPU product ({products})" if known else "name the GPU product"
        yield finding(
            name,
            where,
            f"is empty: an empty value matches no node, so the pod would never be scheduled; "
            f"{fix}{'' if wants else ', or remove the selector: the pod requests no GPUs'}",
        )
    elif known and "{{" not in value and value not in known:
        yield finding(
            name,
            where,
            f"{value!r} is not a GPU product the platform config knows ({products}): no node "
            "of its clusters matches it; right for a cluster the config does not describe, "
            "else a typo",
            "warning",
        )


def _gpu_taint(
    quantities: list[str], pod: Mapping[str, Any], path: str, name: str
) -> Iterator[FieldError]:
    """Only GPU pods tolerate the GPU taint (key ``nvidia.com/gpu``): a pod that tolerates it
    and requests no GPUs can be scheduled onto a GPU node and hold its CPU and memory while
    GPU pods wait. A toleration with operator Exists and no key tolerates every taint."""
    if not all("{{" not in q and _int(q) <= 0 for q in quantities):
        return  # asks for GPUs, or may (a placeholder)
    for i, t in enumerate(pod.get("tolerations") or []):
        key = str(t.get("key") or "")
        if key == GPU_TAINT or (not key and t.get("operator") == "Exists"):
            every = "" if key else " (operator Exists with no key tolerates every taint)"
            yield finding(
                name,
                f"{path}.tolerations[{i}]",
                "tolerates the GPU taint but requests no GPUs: it could occupy a GPU node; "
                f"remove the toleration{every}",
            )


def _restricted(
    c: Mapping[str, Any], pod_sc: Mapping[str, Any], path: str, name: str, *, gang: bool
) -> Iterator[FieldError]:
    """Kubernetes Pod Security Standards, "restricted" profile (capabilities: see
    :func:`_capabilities`)."""
    sc = c.get("securityContext") or {}
    where = f"{path}.securityContext"
    if sc.get("privileged"):
        yield finding(name, f"{where}.privileged", "privileged containers are not allowed")
    if sc.get("allowPrivilegeEscalation") is not False:
        yield finding(name, f"{where}.allowPrivilegeEscalation", "must be false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        yield finding(name, f"{where}.capabilities.drop", "must include ALL")
    yield from _capabilities(c, f"{where}.capabilities.add", name, gang=gang)
    # Pod Security "restricted": neither level may say false, and one of them must say true.
    if sc.get("runAsNonRoot") is False:
        yield finding(name, f"{where}.runAsNonRoot", "must be true (it says false)")
    elif pod_sc.get("runAsNonRoot") is False:
        yield finding(name, f"{where}.runAsNonRoot", "the pod's says false: must be true")
    elif not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        yield finding(name, f"{where}.runAsNonRoot", "must be true (here or on the pod)")
    if sc.get("runAsUser") == 0 or pod_sc.get("runAsUser") == 0:
        yield finding(name, f"{where}.runAsUser", "must not be 0 (root)")
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        yield finding(
            name,
            f"{where}.seccompProfile.type",
            "must be RuntimeDefault or Localhost (here or on the pod)",
        )


def _has_rdma(c: Mapping[str, Any]) -> bool:
    """The container has an RDMA device: an RDMA resource in its limits, not 0 (Kubernetes
    requires the limit for an extended resource)."""
    limits = (c.get("resources") or {}).get("limits") or {}
    return any(is_rdma_resource(str(k)) and str(q).strip() != "0" for k, q in limits.items())


def _capabilities(
    c: Mapping[str, Any], where: str, name: str, *, gang: bool
) -> Iterator[FieldError]:
    """Pod Security "restricted": add nothing but NET_BIND_SERVICE. The platform's one
    exception (docs/gpu-clusters.md): IPC_LOCK, in a gang pod's container that has an RDMA
    device, so that ibverbs may pin the memory NCCL registers; a warning says what the
    cluster does with it."""
    capabilities = (c.get("securityContext") or {}).get("capabilities") or {}
    added = set(capabilities.get("add") or [])
    added.discard("NET_BIND_SERVICE")
    rdma = gang and _has_rdma(c)
    if IPC_LOCK in added and rdma:
        added.discard(IPC_LOCK)
        if not added:
            yield finding(name, where, _IPC_LOCK_NOTE, "warning")
            return
    if not added:
        return
    why = ""
    if IPC_LOCK in added:
        missing = "this container has no RDMA device" if gang else "this is not a gang pod"
        why = (
            f"; IPC_LOCK is allowed only in a gang pod (a Volcano Job's) whose container has "
            f"an RDMA device in resources.limits ({RDMA_RESOURCE_NAMES}), and {missing}"
        )
    yield finding(
        name,
        where,
        f"{sorted(added)} not allowed (Pod Security restricted adds only NET_BIND_SERVICE){why}",
    )


def _negative_resources(c: Mapping[str, Any], path: str, name: str) -> Iterator[FieldError]:
    """Resource quantities are never negative (a negative GPU count would skip the GPU rules)."""
    for kind in ("requests", "limits"):
        for res, q in ((c.get("resources") or {}).get(kind) or {}).items():
            if str(q).strip().startswith("-"):
                yield finding(
                    name, f"{path}.resources.{kind}.{res}", f"{q!r}: a quantity cannot be negative"
                )


def _secrets(c: Mapping[str, Any], path: str, name: str) -> Iterator[FieldError]:
    """Secrets only by reference: no literal values for secret-looking variables."""
    for i, e in enumerate(c.get("env") or []):
        if _SECRETISH.search(str(e.get("name", ""))) and e.get("value"):
            yield finding(
                name,
                f"{path}.env[{i}].value",
                f"{e['name']} looks like a secret given as a literal; use valueFrom.secretKeyRef",
            )
