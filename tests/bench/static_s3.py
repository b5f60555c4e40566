"""A read-only S3 endpoint over a local directory, for the staging benchmark: the three calls a
recursive download makes — ListObjectsV2, HeadObject, GetObject (ranges too) — on HTTP/1.1
keep-alive connections, a thread per connection.

Why it exists: moto's server answers about 100 requests a second, one at a time (it models
all of S3 in Python), so against it both the AWS CLI and Gangway wait on the server and their
transfer designs never show. This endpoint does only what a download needs, from files on
disk, so the client side decides. It is the same wire protocol (botocore parses its answers as
it parses S3's); request signatures are not checked. ``root/BUCKET/KEY`` is object KEY.
"""

from __future__ import annotations

import email.utils
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

__all__ = ["static_s3"]

PAGE = 1000


class _Objects:
    """Every file under ``root`` as ``(bucket, key)`` → path, with its size, ETag and mtime."""

    def __init__(self, root: Path) -> None:
        self.files: dict[tuple[str, str], tuple[Path, int, str, float]] = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            bucket, _, key = path.relative_to(root).as_posix().partition("/")
            md5 = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
            st = path.stat()
            self.files[(bucket, key)] = (path, st.st_size, f'"{md5}"', st.st_mtime)
        self.keys: dict[str, list[str]] = {}
        for bucket, key in self.files:
            self.keys.setdefault(bucket, []).append(key)
        for keys in self.keys.values():
            keys.sort()  # S3's order, which continuation tokens rely on


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes; see latency_proxy
    objects: _Objects

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        url = urlsplit(self.path)
        bucket, _, key = unquote(url.path).lstrip("/").partition("/")
        if not key:
            self._list(bucket, parse_qs(url.query))
            return
        found = self.objects.files.get((bucket, key))
        if found is None:
            self._xml(404, "<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>")
            return
        path, size, etag, mtime = found
        start, end, status = 0, size - 1, 200
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            a, _, b = ranged.removeprefix("bytes=").partition("-")
            start, end, status = int(a or 0), min(int(b) if b else size - 1, size - 1), 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "binary/octet-stream")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if body:
            with path.open("rb") as f:
                f.seek(start)
                self.wfile.write(f.read(end - start + 1))

    def _list(self, bucket: str, query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        after = query.get("continuation-token", query.get("start-after", [""]))[0]
        limit = min(int(query.get("max-keys", [str(PAGE)])[0]), PAGE)
        keys = [k for k in self.objects.keys.get(bucket, []) if k.startswith(prefix) and k > after]
        page, more = keys[:limit], len(keys) > limit
        items = []
        for k in page:
            _, size, etag, mtime = self.objects.files[(bucket, k)]
            stamp = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            items.append(
                f"<Contents><Key>{escape(k)}</Key><LastModified>{stamp}</LastModified>"
                f"<ETag>{escape(etag)}</ETag><Size>{size}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        token = f"<NextContinuationToken>{escape(page[-1])}</NextContinuationToken>" if more else ""
        self._xml(
            200,
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{limit}</MaxKeys>"
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{token}"
            + "".join(items)
            + "</ListBucketResult>",
        )

    def _xml(self, status: int, text: str) -> None:
        data = ('<?xml version="1.0" encoding="UTF-8"?>' + text).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


@contextmanager
def static_s3(root: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` serving ``root`` read-only as S3, for the block."""
    handler = type("Handler", (_Handler,), {"objects": _Objects(root)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
