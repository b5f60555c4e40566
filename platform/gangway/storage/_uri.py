"""Parsing object URIs: ``file:///abs/path`` (or a bare path) and ``s3://bucket/key``."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from gangway.errors import PermanentError

__all__ = ["Location", "join", "parse"]


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
        if self.scheme == "file":
            return Location("file", "", str(Path(self.key) / rel))
        base = self.key.rstrip("/")
        return Location(self.scheme, self.bucket, f"{base}/{rel}" if base else rel)

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.key}"
        return f"s3://{self.bucket}/{self.key}"


def parse(uri: str) -> Location:
    """Parse ``uri``; a bare path counts as ``file://`` and is made absolute."""
    if "://" not in uri:
        if not uri:
            raise PermanentError(
                "empty URI: give file:///abs/path, a local path, or s3://bucket/key"
            )
        return Location("file", "", str(Path(uri).expanduser().resolve()))
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise PermanentError(
                f"{uri!r}: file URIs need an absolute path with three slashes, "
                f"e.g. file:///{parsed.netloc}{parsed.path}"
            )
        return Location("file", "", str(Path(parsed.path).resolve()))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise PermanentError(f"{uri!r}: an s3 URI needs a bucket, e.g. s3://my-bucket/prefix")
        return Location("s3", parsed.netloc, parsed.path.lstrip("/"))
    raise PermanentError(
        f"{uri!r}: unsupported scheme {parsed.scheme!r}; use file:// (local) or s3://"
    )


def join(uri: str, *parts: str) -> str:
    """Join path parts onto a URI, keeping its scheme."""
    if "://" not in uri:
        return str(Path(uri, *parts))
    scheme, rest = uri.split("://", 1)
    return f"{scheme}://" + posixpath.join(rest, *[p.strip("/") for p in parts])
