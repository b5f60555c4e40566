"""The ``file://`` backend: plain files, atomic writes by rename.

Also the local-filesystem helpers the rest of Gangway uses (:func:`os_errors`,
:func:`write_atomic`) and those the publish protocol uses on a local directory
(:func:`list_files`, :func:`is_temp_name`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gangway.errors import NotFoundError, PermanentError, TransientError
from gangway.storage._types import ObjectInfo, OnDone, TreeCommit
from gangway.storage._uri import Location

__all__ = [
    "LocalBackend",
    "copy_files",
    "is_temp_name",
    "list_files",
    "os_errors",
    "temp_sibling",
    "write_atomic",
]

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


def list_files(root: Path) -> list[ObjectInfo]:
    """Every regular file under ``root`` (links followed, temporaries skipped), keys relative
    to it and sorted; ``root`` itself when it is a file; nothing when it is missing."""
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


def copy_files(pairs: Sequence[tuple[Path, Path]], workers: int, on_done: OnDone = None) -> None:
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


class LocalBackend:
    """A ``file://`` location: a file, or a directory tree, on a local filesystem.

    Relative paths are joined onto the location as they are (the publish protocol checks
    the paths a manifest lists before they get here).
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self.root = location.path

    def list_objects(self) -> list[ObjectInfo]:
        return list_files(self.root)

    def exists(self) -> bool:
        return self.root.is_file()

    def read_bytes(self) -> bytes:
        if self.root.is_dir():
            raise PermanentError(f"file://{self.root} is a directory, expected a file")
        with os_errors("read", self.root):
            return self.root.read_bytes()

    def write_bytes(self, data: bytes) -> None:
        write_atomic(self.root, data, fsync=True)

    def delete(self) -> None:
        with os_errors("delete", self.root), contextlib.suppress(FileNotFoundError):
            if self.root.is_dir():
                shutil.rmtree(self.root)  # deleting what is already gone is not an error
            else:
                self.root.unlink()

    def download(self, pairs: Sequence[tuple[str, Path]], workers: int, on_done: OnDone) -> None:
        copy_files([(self.root / rel, dst) for rel, dst in pairs], workers, on_done)

    def upload(self, pairs: Sequence[tuple[Path, str]], workers: int, *, move: bool) -> None:
        if not move:
            copy_files([(src, self.root / rel) for src, rel in pairs], workers)
            return
        for src, rel in pairs:  # same filesystem: rename, don't copy
            dst = self.root / rel
            with os_errors("write", dst):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)

    def publish_tree(self, tree: TreeCommit) -> None:
        """Build the tree in a hidden sibling (renaming ``src`` there with ``move``), write the
        marker into it, then rename it into place in one step, replacing a partial leftover.

        The slow part (copying) runs unlocked; the commit — look at ``dst``, clear a leftover,
        rename into place — runs under an exclusive lock on the parent directory, so a
        committed tree is never moved, even for an instant, under its readers by another
        publisher that took it for a leftover a moment before it was committed."""
        src, dst = tree.src, self.root
        with os_errors("write", dst.parent):
            dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(dst)
        try:
            if tree.move:
                os.replace(src, tmp)
            else:
                pairs = [(src / k, tmp / k) for k in tree.rels]
                copy_files(pairs, workers=tree.workers, on_done=tree.on_done)
            (tmp / tree.marker_name).write_bytes(tree.marker)
            with _directory_lock(dst.parent):
                if tree.committed():  # an identical publisher finished first: publishing is once
                    return
                if os.path.lexists(dst):
                    _clear_leftover(dst)
                os.replace(tmp, dst)
        except OSError as e:
            raise PermanentError(
                f"cannot publish {src} to file://{dst}: {e.strerror or e}; check the path and its "
                "permissions"
            ) from None
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def local_dir(self) -> Path | None:
        return self.root


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``directory`` itself (no lock file is left beside the data);
    the kernel releases it when the holder dies, so a killed publisher never blocks the next."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _clear_leftover(dst: Path) -> None:
    """Remove what a killed publisher left at ``dst`` (no marker: never a committed tree, which
    the caller has ruled out under the lock): renamed aside in one step, then deleted, so the
    path is free at once and a second kill mid-delete leaves only a hidden temporary."""
    aside = temp_sibling(dst)
    os.replace(dst, aside)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)
