"""What the local executor cannot run in a template's containers, found before anything runs
(part of :mod:`gangway.local.validation`): a command it cannot know or find, env it cannot
fill, a missing secret, output parameters it cannot read."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from typing import Any

from gangway.local._env import Secrets, secret_refs

__all__ = ["container_problems"]

_SHELL_WORDS = {"python", "python3", "sh", "bash"}
_OUTPUT_SOURCES = {"path", "default", "expression", "parameter", "supplied", "jsonPath"}


def _all_containers(t: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(label, container)`` of every container of the template's pod, the main one first."""
    found = [("container", t["container"])] if "container" in t else []
    found += [("script", t["script"])] if "script" in t else []
    found += [(f"initContainers[{i}]", c) for i, c in enumerate(t.get("initContainers") or [])]
    found += [(f"sidecars[{i}]", c) for i, c in enumerate(t.get("sidecars") or [])]
    found += [
        (f"containerSet.containers[{i}]", c)
        for i, c in enumerate((t.get("containerSet") or {}).get("containers") or [])
    ]
    return [(label, c or {}) for label, c in found]


def _command(label: str, c: Mapping[str, Any], at: str) -> Iterator[str]:
    """A command the image would supply (none, or only ``args`` for its entrypoint), or one
    this machine does not have."""
    command = [str(a) for a in c.get("command") or []]
    if label == "script" and not command:
        return
    if not command:
        if c.get("args"):
            yield (
                f"{at}: args without command (image {c.get('image')}): Argo runs them with "
                "the image's entrypoint, which is not known locally; give command"
            )
        else:
            yield f"{at}: no command (image entrypoints are not known locally; give command)"
        return
    word = command[0]
    if "{{" not in word and word not in _SHELL_WORDS and shutil.which(word) is None:
        yield (
            f"{at}: command {word!r} (image {c.get('image')}) is not on this machine: local "
            "runs execute commands on this host"
        )


def container_problems(t: Mapping[str, Any], where: str, secrets: Secrets | None) -> Iterator[str]:
    """Each problem of template ``t``'s containers, with its path."""
    containers = _all_containers(t)
    for label, c in containers:
        at = f"{where}.{label}"
        yield from _command(label, c, at)
        for e in c.get("env") or []:
            vf = e.get("valueFrom") or {}
            if vf and not ({"secretKeyRef", "fieldRef"} & set(vf)):
                yield f"{at}: env {e.get('name')}: only secretKeyRef and fieldRef run locally"
        if c.get("envFrom"):
            yield f"{at}: envFrom is not supported locally; list the variables under env"
    if secrets is not None:
        for name, key, optional in secret_refs([c for _, c in containers]):
            if not optional and secrets.value(name, key) is None:
                yield f"{where}: {secrets.missing(name, key)}"
    for p in (t.get("outputs") or {}).get("parameters") or []:
        bad = set(p.get("valueFrom") or {}) - _OUTPUT_SOURCES
        if bad:
            key = sorted(bad)[0]
            yield f"{where}: output {p.get('name')}: valueFrom.{key} is not supported locally"
