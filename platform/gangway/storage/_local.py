"""The ``file://`` backend: plain files, atomic writes by rename."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gangway.errors import NotFoundError, PermanentError
from gangway.storage._types import ObjectInfo

__all__ = ["LocalBackend", "is_temp_name", "temp_sibling", "write_atomic"]

_TMP_MARK = ".tmp-"


def is_temp_name(name: str) -> bool:
    """True for the hidden temporaries this module writes before renaming into place."""
    return name.startswith(".") and _TMP_MARK in name


def temp_sibling(path: Path) -> Path:
    """A hidden, unique name in the same directory (same filesystem, so rename is atomic)."""
    return path.with_name(f".{path.name}{_TMP_MARK}{uuid.uuid4().hex[:12]}")


def write_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to a hidden temporary beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        with tmp.open("wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(dst)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


class LocalBackend:
    """Files under a local directory tree."""

    def list(self, root: Path) -> list[ObjectInfo]:
        if root.is_file():
            return [ObjectInfo(key="", size=root.stat().st_size)]
        if not root.is_dir():
            return []
        out: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not is_temp_name(d))
            for name in sorted(filenames):
                if is_temp_name(name):
                    continue
                p = Path(dirpath) / name
                out.append(ObjectInfo(key=p.relative_to(root).as_posix(), size=p.stat().st_size))
        return out

    def exists(self, path: Path) -> bool:
        return path.is_file()

    def read_bytes(self, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"file://{path} does not exist") from None
        except IsADirectoryError:
            raise PermanentError(f"file://{path} is a directory, expected a file") from None

    def write_bytes(self, path: Path, data: bytes) -> None:
        write_atomic(path, data, fsync=True)

    def copy_files(
        self,
        pairs: Sequence[tuple[Path, Path]],
        workers: int,
        on_done: Callable[[int], None] | None = None,
    ) -> None:
        """Copy (src, dst) pairs in parallel; each destination appears whole or not at all."""
        for src, _ in pairs:
            if not src.is_file():
                raise NotFoundError(f"file://{src} does not exist")

        def one(pair: tuple[Path, Path]) -> None:
            _atomic_copy(*pair)
            if on_done is not None:
                on_done(pair[1].stat().st_size)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(one, pairs))

    def delete(self, paths: Sequence[Path]) -> None:
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
