"""The local artifact repository: where a step's output artifacts go and its input artifacts
come from, as Argo's artifact repository does on a cluster.

Artifacts live under one URI — the run's ``storage-root``/``artifacts`` when the workflow has
that parameter (``file://`` or ``s3://``), else ``artifacts/`` of the state directory — at
``WORKFLOW/NODE/attempt-N/NAME``. As in Argo, an artifact is a tar+gzip archive (``.tgz``)
unless its ``archive`` is ``none``: then a file is stored as it is, and a directory is
published (every file, then a manifest; see :mod:`gangway.storage`). The URI says which, so a
reference (``{{tasks.a.outputs.artifacts.out}}``) is all a reader needs.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gangway import storage
from gangway.errors import PermanentError

__all__ = ["ArtifactStore"]


class ArtifactStore:
    """Save and load artifacts under ``root`` (a storage URI)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def save(self, src: Path, key: str, archive: Mapping[str, Any] | None) -> str:
        """Store the file or directory ``src``; returns its URI."""
        uri = f"{self.root}/{key}"
        if archive is not None and "none" in archive:
            if src.is_dir():
                storage.publish_dir(src, uri + "/")
                return uri + "/"
            storage.upload_file(src, uri)
            return uri
        with tempfile.TemporaryDirectory(prefix="gangway-artifact-") as tmp:
            packed = Path(tmp) / "a.tgz"
            level = int(((archive or {}).get("tar") or {}).get("compressionLevel", 6))
            with tarfile.open(packed, "w:gz", compresslevel=max(1, min(9, level))) as tar:
                tar.add(src, arcname=src.name)
            storage.upload_file(packed, uri + ".tgz")
        return uri + ".tgz"

    def load(self, uri: str, dest: Path) -> None:
        """Put the artifact at ``uri`` at ``dest`` (a file, or a directory's contents)."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        if uri.endswith("/"):
            storage.fetch_dir(uri, dest)
            return
        if not uri.endswith(".tgz"):
            storage.download_file(uri, dest)
            return
        with tempfile.TemporaryDirectory(prefix="gangway-artifact-") as tmp:
            packed = Path(tmp) / "a.tgz"
            storage.download_file(uri, packed)
            out = Path(tmp) / "x"
            with tarfile.open(packed, "r:gz") as tar:
                tar.extractall(out, filter="data")
            members = list(out.iterdir())
            if len(members) != 1:
                raise PermanentError(f"artifact {uri}: expected one file or directory inside")
            _replace(members[0], dest)


def _replace(src: Path, dest: Path) -> None:
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    elif dest.exists():
        dest.unlink()
    shutil.move(str(src), str(dest))
