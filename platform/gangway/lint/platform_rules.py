"""Platform rules: whole gangs, GPUs on GPU nodes, Pod Security "restricted", secrets by
reference. Each check cites the rule it implements."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gangway.lint._findings import Finding
from gangway.step.torchrun import count_problem
from gangway.volcano.gang import gang_problems

__all__ = ["GPU_PRODUCT_LABEL", "check_gang", "check_launch", "check_pod"]

GPU = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_SECRETISH = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)


def check_gang(job: Mapping[str, Any], name: str) -> list[Finding]:
    """Gang rule: minAvailable equals the pod count, so the whole gang is admitted or none
    (:func:`gangway.volcano.gang_problems`)."""
    return [Finding(name, path, message) for path, message in gang_problems(job)]


def check_launch(container: Mapping[str, Any], path: str, name: str) -> list[Finding]:
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
            out.append(Finding(name, f"{path}.{field}[{index}]", f"{arg}: {problem}"))
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
) -> list[Finding]:
    """Pod Security "restricted", GPU placement and secrets-by-reference for one pod."""
    out: list[Finding] = []
    pod_sc = pod.get("securityContext") or {}
    for c, cpath in zip(containers, container_paths, strict=True):
        out += list(_restricted(c, pod_sc, cpath, name))
        out += list(_secrets(c, cpath, name))
        out += list(_negative_resources(c, cpath, name))
    wants_gpu = any(
        _int(((c.get("resources") or {}).get(kind) or {}).get(GPU, 0)) > 0
        for c in containers
        for kind in ("limits", "requests")
        if "{{" not in str(((c.get("resources") or {}).get(kind) or {}).get(GPU, 0))
    )
    if wants_gpu and GPU_PRODUCT_LABEL not in (pod.get("nodeSelector") or {}):
        out.append(
            Finding(
                name,
                f"{path}.nodeSelector",
                f"requests {GPU} but does not select "
                f"a GPU type; add nodeSelector {GPU_PRODUCT_LABEL}: <model>",
            )
        )
    for i, v in enumerate(pod.get("volumes") or []):
        if "hostPath" in v:
            out.append(
                Finding(
                    name,
                    f"{path}.volumes[{i}].hostPath",
                    "hostPath volumes are "
                    "not allowed (Pod Security restricted); use emptyDir or a PVC",
                )
            )
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(Finding(name, f"{path}.{key}", "not allowed (Pod Security restricted)"))
    return out


def _restricted(
    c: Mapping[str, Any], pod_sc: Mapping[str, Any], path: str, name: str
) -> Iterator[Finding]:
    """Kubernetes Pod Security Standards, "restricted" profile."""
    sc = c.get("securityContext") or {}
    where = f"{path}.securityContext"
    if sc.get("privileged"):
        yield Finding(name, f"{where}.privileged", "privileged containers are not allowed")
    if sc.get("allowPrivilegeEscalation") is not False:
        yield Finding(name, f"{where}.allowPrivilegeEscalation", "must be false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        yield Finding(name, f"{where}.capabilities.drop", "must include ALL")
    added = set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}
    if added:
        yield Finding(name, f"{where}.capabilities.add", f"{sorted(added)} not allowed")
    if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        yield Finding(name, f"{where}.runAsNonRoot", "must be true (here or on the pod)")
    if sc.get("runAsUser") == 0 or pod_sc.get("runAsUser") == 0:
        yield Finding(name, f"{where}.runAsUser", "must not be 0 (root)")
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        yield Finding(
            name,
            f"{where}.seccompProfile.type",
            "must be RuntimeDefault or Localhost (here or on the pod)",
        )


def _negative_resources(c: Mapping[str, Any], path: str, name: str) -> Iterator[Finding]:
    """Resource quantities are never negative (a negative GPU count would skip the GPU rules)."""
    for kind in ("requests", "limits"):
        for res, q in ((c.get("resources") or {}).get(kind) or {}).items():
            if str(q).strip().startswith("-"):
                yield Finding(
                    name, f"{path}.resources.{kind}.{res}", f"{q!r}: a quantity cannot be negative"
                )


def _secrets(c: Mapping[str, Any], path: str, name: str) -> Iterator[Finding]:
    """Secrets only by reference: no literal values for secret-looking variables."""
    for i, e in enumerate(c.get("env") or []):
        if _SECRETISH.search(str(e.get("name", ""))) and e.get("value"):
            yield Finding(
                name,
                f"{path}.env[{i}].value",
                f"{e['name']} looks like a secret given as a literal; use valueFrom.secretKeyRef",
            )
