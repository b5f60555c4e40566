"""A pod's file system, locally: the container paths a template uses, each mapped to a
directory of this machine, so that side-by-side steps do not share ``/tmp`` and a volume is the
same directory for every step that mounts it.

A local step is a host process, not a container: it sees this machine's file system. So the
container paths a template names — ``/gangway``, Hera's outputs directory, each volume's
``mountPath``, each artifact's and output parameter's ``path`` (exactly that path: a
template's other ``/tmp`` paths stay the host's) — are rewritten in its *literal* text
(command, args, script source, env values, working directory) before its placeholders are
filled: a value that arrives through a parameter (a host path a user passed) is never
rewritten. ``TMPDIR`` points at a ``tmp`` directory of the attempt, for code that asks for a
temporary directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.contract import HERA_OUTPUTS, SCRATCH

__all__ = ["PodFiles", "pod_files"]


@dataclass(frozen=True)
class PodFiles:
    """Container path prefixes → host directories, longest first."""

    mounts: tuple[tuple[str, Path], ...]

    def host(self, container_path: str) -> Path:
        """Where ``container_path`` is on this machine."""
        for prefix, host in self.mounts:
            if container_path == prefix or container_path.startswith(prefix.rstrip("/") + "/"):
                return host / container_path[len(prefix) :].lstrip("/")
        return Path(container_path)

    def text(self, text: str) -> str:
        """``text`` with every container path in it replaced by its host path."""
        if not self.mounts:
            return text
        return self._pattern.sub(lambda m: str(self.host(m.group(0))), text)

    def tree(self, obj: Any) -> Any:
        """:meth:`text` on every string of a JSON-like tree."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list):
            return [self.tree(v) for v in obj]
        if isinstance(obj, dict):
            return {k: self.tree(v) for k, v in obj.items()}
        return obj

    @property
    def _pattern(self) -> re.Pattern[str]:
        alts = "|".join(re.escape(p.rstrip("/")) for p, _ in self.mounts)
        # A container path starts a word (not ``/var/tmp``, not ``file:///tmp``) and ends at a
        # path boundary (``/tmp/x`` and ``/tmp`` match, ``/tmpfoo`` does not).
        return re.compile(rf"(?<![\w./:-])(?:{alts})(?![\w.-])(?:/[^\s'\"`;|&<>(){{}}$]*)?")


def pod_files(
    template: Mapping[str, Any],
    scratch: Path,
    volumes: Mapping[str, Path],
    containers: Iterable[Mapping[str, Any]],
) -> PodFiles:
    """The mounts of one attempt of ``template``: ``/gangway`` and Hera's outputs directory of
    its own, its volumes (``volumes``: name → host directory) where its containers mount them,
    and the paths its artifacts and output parameters name."""
    mounts: dict[str, Path] = {SCRATCH: scratch, HERA_OUTPUTS: scratch / "hera-outputs"}
    for c in containers:
        for e in c.get("env") or []:  # Hera's runner, told to write its outputs elsewhere
            value = str(e.get("value", ""))
            if e.get("name") == "hera__outputs_directory" and value.startswith("/"):
                mounts.setdefault(value.rstrip("/"), scratch / "root" / value.strip("/"))
        for m in c.get("volumeMounts") or []:
            name, path = m.get("name"), str(m.get("mountPath", ""))
            # ``/gangway`` is the attempt's own directory already (what its emptyDir is).
            if name in volumes and path.startswith("/") and path.rstrip("/") != SCRATCH:
                mounts[path.rstrip("/") or "/"] = volumes[name] / str(m.get("subPath", ""))
    for host in mounts.values():
        host.mkdir(parents=True, exist_ok=True)
    for path in _declared_paths(template):
        if not any(path == p or path.startswith(p.rstrip("/") + "/") for p in mounts):
            mounts[path] = scratch / "root" / path.lstrip("/")
            mounts[path].parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(mounts.items(), key=lambda kv: -len(kv[0]))
    return PodFiles(tuple((k, v) for k, v in ordered if k != "/"))


def _declared_paths(template: Mapping[str, Any]) -> list[str]:
    out = []
    for io in ("inputs", "outputs"):
        for a in (template.get(io) or {}).get("artifacts") or []:
            out.append(str(a.get("path", "")))
    for p in (template.get("outputs") or {}).get("parameters") or []:
        out.append(str((p.get("valueFrom") or {}).get("path", "")))
    return [p for p in out if p.startswith("/") and "{{" not in p]
