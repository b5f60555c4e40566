"""A pod's file system, locally: the container paths a template uses, each mapped to a
directory of this machine, so that side-by-side steps do not share ``/tmp`` and a volume is the
same directory for every step that mounts it.

A local step is a host process, not a container: it sees this machine's file system. So the
container paths a template names — ``/gangway``, Hera's outputs directory, each volume's
``mountPath``, each artifact's and output parameter's ``path`` (exactly that path: a
template's other ``/tmp`` paths stay the host's) — are rewritten in its *literal* text
(command, args, script source, env values, working directory) before its placeholders are
filled: a value that arrives through a parameter (a host path a user passed) is never
rewritten.

The attempt has a root directory, the container's ``/``: a declared path that no volume or
fixed directory holds is under it (``/out.txt`` is ``ROOT/out.txt``), and every container
starts in it (or in its ``workingDir``, mapped the same way), as a container starts in its
image's working directory (``/`` unless the image says otherwise). So a relative path a step
writes lands where the mapped absolute path points, and a relative declared path is resolved
against the main container's ``workingDir`` (else ``/``), as the container resolves it. ``/tmp``
exists under the root, and ``TMPDIR`` points at the pod's ``/tmp``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.contract import HERA_OUTPUTS, SCRATCH

__all__ = ["PodFiles", "map_scratch", "pod_files"]


@dataclass(frozen=True)
class PodFiles:
    """Container path prefixes → host directories, longest first."""

    mounts: tuple[tuple[str, Path], ...]
    root: Path | None = None
    """The attempt's ``/``: where a container starts, unless its ``workingDir`` says."""
    workdir: str = "/"
    """The main container's working directory: what a relative declared path is under."""

    def host(self, container_path: str) -> Path:
        """Where ``container_path`` (relative: under :attr:`workdir`) is on this machine."""
        path = self.absolute(container_path)
        return self._mapped(path) or Path(path)

    def absolute(self, container_path: str) -> str:
        """``container_path`` as the main container resolves it: absolute, normalised."""
        if not container_path:
            return container_path
        return posixpath.normpath(posixpath.join(self.workdir, container_path))

    def cwd(self, working_dir: str | None) -> Path:
        """The host directory a container whose ``workingDir`` is ``working_dir`` starts in:
        the attempt's root ``/`` when it names none."""
        path = posixpath.normpath(posixpath.join("/", working_dir or "/"))
        found = self._mapped(path)
        if found is None and self.root is not None:
            found = self.root / path.lstrip("/")
        return found or Path(path)

    def nested(self, container_path: str) -> list[tuple[str, Path]]:
        """The directories mounted below ``container_path`` that are not inside its own host
        directory (a volume, Hera's outputs…), each as ``(path relative to it, host dir)``:
        what a container would see inside ``container_path`` besides that directory."""
        top = self.absolute(container_path).rstrip("/")
        base = self.host(top or "/") if top else self.root
        out = []
        for prefix, host in self.mounts:
            if not prefix.startswith(top + "/") or prefix == top:
                continue
            rel = prefix[len(top) + 1 :].rstrip("/")
            if base is None or host != base / rel:
                out.append((rel, host))
        return out

    def _mapped(self, path: str) -> Path | None:
        for prefix, host in self.mounts:
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return host / path[len(prefix) :].lstrip("/")
        return None

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
    and, under the attempt's root, its containers' working directories and the paths its
    artifacts and output parameters name."""
    containers = list(containers)
    root = scratch / "root"
    mounts: dict[str, Path] = {SCRATCH: scratch, HERA_OUTPUTS: scratch / "hera-outputs"}
    for c in containers:
        for e in c.get("env") or []:  # Hera's runner, told to write its outputs elsewhere
            value = str(e.get("value", ""))
            if e.get("name") == "hera__outputs_directory" and value.startswith("/"):
                mounts.setdefault(value.rstrip("/"), root / value.strip("/"))
        for m in c.get("volumeMounts") or []:
            name, path = m.get("name"), str(m.get("mountPath", ""))
            # ``/gangway`` is the attempt's own directory already (what its emptyDir is).
            if name in volumes and path.startswith("/") and path.rstrip("/") != SCRATCH:
                mounts[path.rstrip("/") or "/"] = volumes[name] / str(m.get("subPath", ""))
    (root / "tmp").mkdir(parents=True, exist_ok=True)  # every container has a /tmp
    for host in mounts.values():
        host.mkdir(parents=True, exist_ok=True)
    main = template.get("script") or template.get("container") or {}
    workdir = _literal(str(main.get("workingDir") or "/"), "/") or "/"
    for c in containers:  # a container's working directory exists when it starts
        wd = _literal(str(c.get("workingDir") or ""), "/")
        if wd and wd != "/" and not _under(wd, mounts):
            mounts[wd] = root / wd.lstrip("/")
            mounts[wd].mkdir(parents=True, exist_ok=True)
    for path in _declared_paths(template, workdir):
        if not _under(path, mounts):
            mounts[path] = root / path.lstrip("/")
            mounts[path].parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(mounts.items(), key=lambda kv: -len(kv[0]))
    return PodFiles(tuple((k, v) for k, v in ordered if k != "/"), root, workdir)


def _under(path: str, mounts: Mapping[str, Path]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in mounts)


def _literal(path: str, base: str) -> str:
    """``path`` (resolved against ``base``, normalised), or "" for none or a placeholder."""
    if not path or "{{" in path:
        return ""
    return posixpath.normpath(posixpath.join(base, path))


def _declared_paths(template: Mapping[str, Any], workdir: str) -> list[str]:
    out = []
    for io in ("inputs", "outputs"):
        for a in (template.get(io) or {}).get("artifacts") or []:
            out.append(str(a.get("path", "")))
    for p in (template.get("outputs") or {}).get("parameters") or []:
        out.append(str((p.get("valueFrom") or {}).get("path", "")))
    paths = (_literal(p, workdir) for p in out)
    return [p for p in paths if p and p != "/"]


def map_scratch(text: str, scratch: Path) -> str:
    """Point ``/gangway/...`` (as a whole argument or after ``=``) and Hera's outputs directory
    at directories of this step attempt."""
    if text == HERA_OUTPUTS or text.startswith(HERA_OUTPUTS + "/"):
        return str(scratch) + "/hera-outputs" + text[len(HERA_OUTPUTS) :]
    if text == SCRATCH or text.startswith(SCRATCH + "/"):
        return str(scratch) + text[len(SCRATCH) :]
    return text.replace("=" + SCRATCH + "/", f"={scratch}/")
