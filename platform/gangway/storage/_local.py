"""The ``file://`` backend: plain files, atomic writes by rename."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gangway.errors import NotFoundError, PermanentError, TransientError
from gangway.storage._types import ObjectInfo

__all__ = ["LocalBackend", "is_temp_name", "os_errors", "temp_sibling", "write_atomic"]

_TMP_MARK = ".tmp-"
_TRANSIENT = {errno.ENOSPC, errno.EIO, errno.EAGAIN, errno.EINTR, errno.ENOMEM, errno.EDQUOT}


@contextlib.contextmanager
def os_errors(action: str, path: Path) -> Iterator[None]:
    """Turn an ``OSError`` into the error contract, naming the path: a full disk or an I/O
    error may pass (transient); a missing parent, a permission or a read-only filesystem will
    not (permanent)."""
    try:
        yield
    except OSError as e:
        if isinstance(e, FileNotFoundError | NotADirectoryError) and action == "read":
            raise NotFoundError(f"file://{path} does not exist") from None
        what = e.strerror or type(e).__name__
        at = f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""
        msg = f"cannot {action} file://{path}: {what}{at}"
        if e.errno in _TRANSIENT:
            raise TransientError(msg) from None
        raise PermanentError(f"{msg}; check the path and its permissions") from None


def is_temp_name(name: str) -> bool:
    """True for the hidden temporaries this module writes before renaming into place."""
    return name.startswith(".") and _TMP_MARK in name


def temp_sibling(path: Path) -> Path:
    """A hidden, unique name in the same directory (same filesystem, so rename is atomic)."""
    return path.with_name(f".{path.name}{_TMP_MARK}{uuid.uuid4().hex[:12]}")


def write_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to a hidden temporary beside ``path``, then rename it into place."""
    tmp = temp_sibling(path)
    with os_errors("write", path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as f:
                f.write(data)
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


def _atomic_copy(src: Path, dst: Path) -> None:
    tmp = temp_sibling(dst)
    with os_errors("write", dst):
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


def _stat(path: Path) -> os.stat_result | None:
    """``stat`` following links; None when nothing is there, an error naming it otherwise."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        with os_errors("list", path):
            raise e


class LocalBackend:
    """Files under a local directory tree."""

    def list(self, root: Path) -> list[ObjectInfo]:
        st = _stat(root)  # missing: an empty listing; forbidden: an error naming the path
        if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            return []
        if stat.S_ISREG(st.st_mode):
            return [ObjectInfo(key="", size=st.st_size)]
        out: list[ObjectInfo] = []

        def unreadable(e: OSError) -> None:
            with os_errors("list", Path(e.filename or root)):
                raise e

        for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
            dirnames[:] = sorted(d for d in dirnames if not is_temp_name(d))
            for name in sorted(filenames):
                if is_temp_name(name):
                    continue
                p = Path(dirpath) / name
                entry = _stat(p)  # None: a dangling link, or gone meanwhile — not an object
                if entry is not None and stat.S_ISREG(entry.st_mode):
                    out.append(ObjectInfo(key=p.relative_to(root).as_posix(), size=entry.st_size))
        return out

    def exists(self, path: Path) -> bool:
        return path.is_file()

    def read_bytes(self, path: Path) -> bytes:
        if path.is_dir():
            raise PermanentError(f"file://{path} is a directory, expected a file")
        with os_errors("read", path):
            return path.read_bytes()

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
            with os_errors("delete", p), contextlib.suppress(FileNotFoundError):
                if p.is_dir():
                    shutil.rmtree(p)  # deleting what is already gone is not an error
                else:
                    p.unlink()
