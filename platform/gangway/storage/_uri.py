"""Parsing object URIs: ``file:///abs/path`` (or a bare path) and ``s3://bucket/key``.

One rule for every scheme, so that a URI names the same objects whichever backend holds them
(see ``docs/storage-and-checkpoints.md``, "URIs"):

* a URI is taken **literally**: no percent-decoding, no normalising;
* ``#`` and ``?`` are refused anywhere (a URL parser reads them as fragment and query and
  silently drops the rest of the path), and so are control characters;
* ``.`` and ``..`` segments are refused (``file://`` would resolve them, S3 would keep them as
  part of the key, so the same URI would name different objects), and so are empty segments
  (``a//b``); a trailing ``/`` is allowed;
* an S3 bucket name follows S3's rules (3–63 of ``a-z 0-9 . -``).

A bare path (no ``scheme://``) is a local path: it may be relative and use ``..``; it is made
absolute, and then the same character rule applies.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from gangway.errors import PermanentError

__all__ = ["Location", "check_relative", "join", "parse"]

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_FIX = "rename it without that character"


@dataclass(frozen=True)
class Location:
    """A parsed URI. ``bucket`` is empty for ``file``; ``key`` has no leading slash for s3."""

    scheme: str
    bucket: str
    key: str

    @property
    def path(self) -> Path:
        """The local path of a ``file`` location."""
        return Path(self.key)

    def child(self, rel: str) -> Location:
        rel = rel.lstrip("/")
        if not rel:
            return self
        check_relative(str(self), rel)
        if self.scheme == "file":
            return Location("file", "", str(Path(self.key) / rel))
        base = self.key.rstrip("/")
        return Location(self.scheme, self.bucket, f"{base}/{rel}" if base else rel)

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.key}"
        return f"s3://{self.bucket}/{self.key}"


def _check_chars(uri: str, text: str) -> None:
    for ch, why in (
        ("#", "it would be read as a URL fragment and the rest of the path dropped"),
        ("?", "it would be read as a URL query and the rest of the path dropped"),
    ):
        if ch in text:
            raise PermanentError(f"{uri!r}: {ch!r} is not allowed in a storage URI ({why}); {_FIX}")
    if _CONTROL.search(text):
        raise PermanentError(
            f"{uri!r}: control characters (newline, tab, …) are not allowed in a storage URI; "
            f"{_FIX}"
        )


def _check_segments(uri: str, path: str) -> None:
    """No ``.``/``..`` segments and no empty ones (``a//b``); a trailing ``/`` is fine."""
    segments = path.strip("/").split("/") if path.strip("/") else []
    for seg in segments:
        if seg in (".", ".."):
            raise PermanentError(
                f"{uri!r}: {seg!r} path segments are not allowed in a storage URI (file:// would "
                "resolve them, s3:// would keep them in the key); write the path it means"
            )
        if seg == "":
            raise PermanentError(f"{uri!r}: empty path segment ('//'); write a single '/'")


def check_relative(base: str, rel: str) -> None:
    """A relative key below ``base`` that stays below it (the same rule as a URI's path)."""
    where = f"{base.rstrip('/')}/{rel}"
    _check_chars(where, rel)
    _check_segments(where, rel)


def parse(uri: str) -> Location:
    """Parse ``uri`` by the rule above; a bare path counts as ``file://`` and is made absolute."""
    if not uri:
        raise PermanentError("empty URI: give file:///abs/path, a local path, or s3://bucket/key")
    if "://" not in uri:
        if _SCHEME.match(uri):
            raise PermanentError(
                f"{uri!r}: a URI needs '://' (file:///abs/path or s3://bucket/key); without it "
                "this would be read as a relative path"
            )
        _check_chars(uri, uri)
        return Location("file", "", str(Path(uri).expanduser().resolve()))
    scheme, rest = uri.split("://", 1)
    _check_chars(uri, rest)
    netloc, _, path = rest.partition("/")
    if scheme == "file":
        if netloc not in ("", "localhost"):
            raise PermanentError(
                f"{uri!r}: file URIs need an absolute path with three slashes, "
                f"e.g. file:///{netloc}/{path}"
            )
        _check_segments(uri, path)
        return Location("file", "", str(Path("/" + path).resolve()))
    if scheme == "s3":
        if not netloc:
            raise PermanentError(f"{uri!r}: an s3 URI needs a bucket, e.g. s3://my-bucket/prefix")
        if not _BUCKET.match(netloc) or ".." in netloc:
            raise PermanentError(
                f"{uri!r}: {netloc!r} is not a valid S3 bucket name (3-63 characters: "
                "lowercase letters, digits, '.' and '-')"
            )
        _check_segments(uri, path)
        return Location("s3", netloc, path)
    raise PermanentError(f"{uri!r}: unsupported scheme {scheme!r}; use file:// (local) or s3://")


def join(uri: str, *parts: str) -> str:
    """Join path parts onto a URI, keeping its scheme."""
    if "://" not in uri:
        return str(Path(uri, *parts))
    scheme, rest = uri.split("://", 1)
    return f"{scheme}://" + posixpath.join(rest, *[p.strip("/") for p in parts])
