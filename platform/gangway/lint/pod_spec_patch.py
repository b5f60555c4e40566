"""``podSpecPatch`` (the workflow's and a template's): a strategic merge patch Argo applies to
the pod spec it built, so it can make any container privileged or the pod share the host's
network. Best effort: the patch (JSON or YAML, as Argo takes either) is read with the values
known before the run filled in; a value it sets that Pod Security "restricted" forbids is a
finding at its path inside the patch; a container it adds (a name the pod does not have) is
checked as a whole container. A patch that cannot be read is a warning: it is not checked.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

import yaml

from gangway.errors import FieldError
from gangway.lint._findings import finding
from gangway.lint.platform_rules import check_pod, check_pod_fields
from gangway.user_yaml import load_yaml

__all__ = ["check_pod_spec_patch"]

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
EXECUTOR_CONTAINERS = frozenset({"main", "init", "wait"})
"""The containers Argo itself puts in a pod (the executor's, and ``main``)."""


def check_pod_spec_patch(
    text: str, path: str, name: str, known: Collection[str], fill: Any
) -> list[FieldError]:
    """Findings for the podSpecPatch ``text`` at ``path``: ``known`` are the names of the
    pod's containers; ``fill`` fills a string's known placeholders."""
    try:
        patch = load_yaml(fill(text))
    except yaml.YAMLError:
        patch = None
    if not isinstance(patch, Mapping):
        return [
            finding(
                name,
                path,
                "could not be read as a pod spec patch (JSON or YAML), so the containers it "
                "changes are not checked against Pod Security restricted",
                "warning",
            )
        ]
    out = list(_pod_level(patch, path, name))
    names = {*known, *EXECUTOR_CONTAINERS}
    for key in CONTAINER_LISTS:
        for k, c in enumerate(patch.get(key) or []):
            if not isinstance(c, Mapping):
                continue
            cpath = f"{path}.{key}[{k}]"
            if c.get("name") not in names:  # a container of its own: every rule applies
                out += check_pod([c], {}, path, name, [cpath])
            else:
                out += list(_set_values(c.get("securityContext") or {}, cpath, name))
    return out


def _pod_level(patch: Mapping[str, Any], path: str, name: str) -> Iterator[FieldError]:
    yield from check_pod_fields(patch, path, name)
    sc = patch.get("securityContext") or {}
    if isinstance(sc, Mapping):
        yield from _identity(sc, f"{path}.securityContext", name)


def _identity(sc: Mapping[str, Any], where: str, name: str) -> Iterator[FieldError]:
    if sc.get("runAsNonRoot") is False:
        yield finding(name, f"{where}.runAsNonRoot", "must not be false (Pod Security restricted)")
    if sc.get("runAsUser") == 0:
        yield finding(name, f"{where}.runAsUser", "must not be 0 (root)")
    seccomp = (sc.get("seccompProfile") or {}).get("type")
    if seccomp is not None and seccomp not in ("RuntimeDefault", "Localhost"):
        yield finding(name, f"{where}.seccompProfile.type", "must be RuntimeDefault or Localhost")


def _set_values(sc: Mapping[str, Any], cpath: str, name: str) -> Iterator[FieldError]:
    """What a patch sets in a container's securityContext that "restricted" forbids."""
    where = f"{cpath}.securityContext"
    if not isinstance(sc, Mapping):
        return
    if sc.get("privileged"):
        yield finding(name, f"{where}.privileged", "privileged containers are not allowed")
    if sc.get("allowPrivilegeEscalation") is True:
        yield finding(name, f"{where}.allowPrivilegeEscalation", "must be false")
    caps = sc.get("capabilities") or {}
    added = sorted(set(caps.get("add") or []) - {"NET_BIND_SERVICE"})
    if added:
        yield finding(
            name,
            f"{where}.capabilities.add",
            f"{added} not allowed (Pod Security restricted adds only NET_BIND_SERVICE)",
        )
    if "drop" in caps and "ALL" not in (caps.get("drop") or []):
        yield finding(name, f"{where}.capabilities.drop", "must include ALL")
    yield from _identity(sc, where, name)
