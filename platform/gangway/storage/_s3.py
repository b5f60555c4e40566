"""The ``s3://`` backend over botocore; large objects through s3transfer's TransferManager.

The endpoint and credentials come from the standard AWS environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, profiles, instance roles, ...). botocore is imported only when an
``s3://`` URI is used, so ``file://`` steps start fast.

A directory of many small files costs one request per file, and on a small machine the
client's CPU per request (botocore's, a few milliseconds) decides the time as much as the
latency does. So: one client per process (building one parses the S3 service model), no
listing or HeadObject before a download (the GET itself says whether the object is large),
and worker threads that pull the next file themselves instead of a future per file.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from gangway.errors import NotFoundError, PermanentError, TransientError
from gangway.storage._local import write_atomic as _write_atomic
from gangway.storage._types import ObjectInfo, OnDone, TreeCommit
from gangway.storage._uri import Location

__all__ = ["S3Backend", "s3_errors"]

_TRANSIENT_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "Throttling",
    "ThrottlingException",
}
_NOT_FOUND_CODES = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}

MULTIPART_THRESHOLD = 16 * 1024 * 1024
MIN_POOL = 32
"""Connections the shared client keeps at least (the default transfer concurrency)."""
_T = TypeVar("_T")
_clients: dict[str, tuple[int, Any]] = {}
_lock = threading.Lock()


def _client(pool: int = MIN_POOL) -> Any:
    """The process-wide S3 client for the endpoint in the environment, with a connection pool
    of at least ``pool`` (one per concurrent request; a smaller pool would drop and reopen
    connections). One client serves every call; a larger ``pool`` than it has replaces it."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    with _lock:
        cached = _clients.get(endpoint)
        if cached is None or cached[0] < pool:
            size = max(MIN_POOL, pool)
            cached = _clients[endpoint] = (size, _new_client(size))
        return cached[1]


def _new_client(pool: int) -> Any:
    import botocore.session
    from botocore.config import Config

    cfg = Config(
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=pool,
        connect_timeout=10,
        read_timeout=60,
        # Integrity is end to end: every published file's sha256 is in its manifest
        # and is checked after download, so botocore's per-request CRCs are redundant.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = botocore.session.get_session()
    # Every GetObject answer carries a Last-Modified date; the default parser (dateutil)
    # costs a sizeable share of the client's CPU per small object.
    parsers = session.get_component("response_parser_factory")
    parsers.set_parser_defaults(timestamp_parser=_parse_timestamp)
    try:
        return session.create_client("s3", config=cfg)
    except ValueError as e:  # e.g. AWS_ENDPOINT_URL is not a URL
        raise PermanentError(
            f"cannot set up S3: {e}; check AWS_ENDPOINT_URL (e.g. http://127.0.0.1:9000) "
            "and the AWS profile"
        ) from None


def _parse_timestamp(value: Any) -> datetime:
    """An HTTP date (headers) or ISO 8601 (listings) quickly; anything else as botocore does."""
    if isinstance(value, str):
        for parse in (email.utils.parsedate_to_datetime, datetime.fromisoformat):
            with contextlib.suppress(TypeError, ValueError):
                parsed = parse(value)
                if parsed.tzinfo is not None:
                    return parsed
    from botocore.utils import parse_timestamp

    stamp: datetime = parse_timestamp(value)
    return stamp


@contextlib.contextmanager
def s3_errors(what: str) -> Iterator[None]:
    """Translate botocore failures into Gangway's retryable / permanent errors."""
    from botocore import exceptions as bce

    try:
        yield
    except bce.ClientError as e:
        err = e.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in _NOT_FOUND_CODES or status == 404:
            raise NotFoundError(f"{what}: not found ({code or status})") from None
        if code in _TRANSIENT_CODES or status >= 500 or status == 429:
            raise TransientError(f"{what}: S3 server error {code} ({status}); retry later") from e
        if code in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            raise PermanentError(
                f"{what}: access denied ({code}); check AWS credentials and bucket policy"
            ) from None
        raise PermanentError(f"{what}: S3 error {code} ({status}): {err.get('Message', '')}") from e
    except bce.NoCredentialsError:
        raise PermanentError(
            f"{what}: no AWS credentials; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"
        ) from None
    except (
        bce.EndpointConnectionError,
        bce.ConnectionClosedError,
        bce.ConnectTimeoutError,
        bce.ReadTimeoutError,
    ) as e:
        raise TransientError(
            f"{what}: cannot reach the S3 endpoint ({e}); check AWS_ENDPOINT_URL or retry"
        ) from e


def check_bucket(location: Location) -> None:
    """Raise unless ``location``'s bucket exists and answers (one HeadBucket, no listing)."""
    with s3_errors(f"s3://{location.bucket}: bucket"):
        _client().head_bucket(Bucket=location.bucket)


class S3Backend:
    """An ``s3://`` location: an object, or the objects under a prefix, in one bucket.

    A relative path becomes the key below the location's (checked by the URI rule).
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self.bucket = location.bucket

    def _key(self, rel: str) -> str:
        return self.location.child(rel).key

    def _uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _tree(self) -> list[ObjectInfo]:
        """The objects below the location taken as a directory (never the object itself)."""
        return self._list(self.location.key.rstrip("/") + "/")

    def list_objects(self) -> list[ObjectInfo]:
        return self._list(self.location.key)

    def exists(self) -> bool:
        key = self.location.key
        try:
            with s3_errors(self._uri(key)):
                _client().head_object(Bucket=self.bucket, Key=key)
        except NotFoundError:
            return False
        return True

    def read_bytes(self) -> bytes:
        key = self.location.key
        with s3_errors(self._uri(key)):
            body = _client().get_object(Bucket=self.bucket, Key=key)["Body"]
            data: bytes = body.read()
            return data

    def write_bytes(self, data: bytes) -> None:
        self._put(self.location.key, data)

    def delete(self) -> None:
        keys = [self._key(o.key) for o in self.list_objects()]
        if keys:
            self._delete_keys(keys)

    def download(self, pairs: Sequence[tuple[str, Path]], workers: int, on_done: OnDone) -> None:
        """One GetObject per file, with no listing or HeadObject first (see
        :meth:`_download_files`)."""
        self._download_files([(self._key(rel), dst) for rel, dst in pairs], workers, on_done)

    def upload(self, pairs: Sequence[tuple[Path, str]], workers: int, *, move: bool) -> None:
        """Upload the pairs; ``move`` does not apply to S3 (the local files are kept)."""
        self._upload_files([(src, self._key(rel)) for src, rel in pairs], workers)

    def publish_tree(self, tree: TreeCommit) -> None:
        """Upload the files, delete leftovers of an interrupted publish, PUT the marker last.

        The leftovers are listed while the files upload (a round trip less; the files this
        publish writes are not leftovers, whichever version of them the listing sees). Each
        PUT is atomic on its own, so no race needs ``committed``; ``move`` does not apply.
        """
        keep = {*tree.rels, tree.marker_name}  # the marker is replaced by the last PUT
        pairs = [(tree.src / k, self._key(k)) for k in tree.rels]
        with ThreadPoolExecutor(max_workers=1) as lister:
            listing = lister.submit(self._tree)
            self._upload_files(pairs, tree.workers, tree.on_done)
            stale = [o.key for o in listing.result() if o.key not in keep]
        if stale:  # leftovers of an earlier, interrupted publish
            self._delete_keys([self._key(k) for k in stale])
        self._put(self._key(tree.marker_name), tree.marker)

    def local_dir(self) -> Path | None:
        return None

    def _list(self, prefix: str) -> list[ObjectInfo]:
        client = _client()
        out: list[ObjectInfo] = []
        with s3_errors(self._uri(prefix)):
            # An exact object counts as a listing of one, like a local file.
            if prefix and not prefix.endswith("/"):
                with contextlib.suppress(NotFoundError):
                    with s3_errors(self._uri(prefix)):
                        head = client.head_object(Bucket=self.bucket, Key=prefix)
                    return [ObjectInfo(key="", size=int(head["ContentLength"]))]
            dir_prefix = prefix.rstrip("/") + "/" if prefix else ""
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=dir_prefix
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    out.append(
                        ObjectInfo(
                            key=obj["Key"][len(dir_prefix) :],
                            size=int(obj["Size"]),
                            etag=obj.get("ETag"),
                        )
                    )
        return sorted(out, key=lambda o: o.key)

    def _put(self, key: str, data: bytes) -> None:
        """A single PUT: S3 makes the object visible whole or not at all."""
        with s3_errors(self._uri(key)):
            _client().put_object(Bucket=self.bucket, Key=key, Body=data)

    def _transfer(self, workers: int) -> Any:
        from s3transfer.manager import TransferConfig, TransferManager

        cfg = TransferConfig(
            max_request_concurrency=workers,
            max_submission_concurrency=max(5, workers // 2),
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_THRESHOLD,
        )
        return TransferManager(_client(workers), cfg)

    def _download_files(
        self, items: Sequence[tuple[str, Path]], workers: int, on_done: OnDone = None
    ) -> None:
        """Download (key, path) items concurrently; each lands via temp file + rename.

        Every object starts as one plain GetObject (s3transfer's per-object task machinery
        costs more CPU than the request itself for a small one). An answer showing a large
        object is dropped unread, and the object goes to s3transfer with the size and ETag
        that answer gave (so no HeadObject): ranged GETs in parallel, each checked against
        the ETag.
        """
        client = _client(workers)
        large: list[tuple[str, Path, ObjectInfo]] = []

        def get(item: tuple[str, Path]) -> int | None:
            key, path = item
            with s3_errors(self._uri(key)):
                answer = client.get_object(Bucket=self.bucket, Key=key)
                size = answer.get("ContentLength")
                if size is not None and int(size) >= MULTIPART_THRESHOLD:
                    answer["Body"].close()
                    large.append((key, path, ObjectInfo(key, int(size), answer.get("ETag"))))
                    return None
                data: bytes = answer["Body"].read()
            _write_atomic(path, data)
            return len(data)

        self._each(get, items, workers, on_done)
        if large:
            self._download_large(large, workers, on_done)

    def _download_large(
        self, large: Sequence[tuple[str, Path, ObjectInfo]], workers: int, on_done: OnDone
    ) -> None:
        from s3transfer.subscribers import BaseSubscriber

        class _Known(BaseSubscriber):
            def __init__(self, info: ObjectInfo) -> None:
                self.info = info

            def on_queued(self, future: Any, **kwargs: Any) -> None:
                future.meta.provide_transfer_size(self.info.size)
                if self.info.etag:
                    future.meta.provide_object_etag(self.info.etag)

        for parent in {path.parent for _, path, _ in large}:
            parent.mkdir(parents=True, exist_ok=True)
        with s3_errors(self._uri(large[0][0])), self._transfer(workers) as manager:
            futures = [
                manager.download(self.bucket, key, str(path), subscribers=[_Known(info)])
                for key, path, info in large
            ]
            self._wait(futures, [info.size for _, _, info in large], on_done)

    def _upload_files(
        self, pairs: Sequence[tuple[Path, str]], workers: int, on_done: OnDone = None
    ) -> None:
        """Upload (path, key) pairs: small files with one PutObject each, large ones multipart."""
        sized = [(path, key, path.stat().st_size) for path, key in pairs]
        small = [(path, key) for path, key, n in sized if n < MULTIPART_THRESHOLD]
        large = [(path, key, n) for path, key, n in sized if n >= MULTIPART_THRESHOLD]
        client = _client(workers)

        def put(item: tuple[Path, str]) -> int:
            path, key = item
            with s3_errors(self._uri(key)):
                data = path.read_bytes()
                client.put_object(Bucket=self.bucket, Key=key, Body=data)
            return len(data)

        self._each(put, small, workers, on_done)
        if not large:
            return
        with s3_errors(self._uri(large[0][1])), self._transfer(workers) as manager:
            futures = [manager.upload(str(path), self.bucket, key) for path, key, _ in large]
            self._wait(futures, [n for _, _, n in large], on_done)

    @staticmethod
    def _each(
        fn: Callable[[_T], int | None], items: Sequence[_T], workers: int, on_done: OnDone
    ) -> None:
        """``fn`` on every item, on up to ``workers`` threads that each take the next item as
        they finish one: no future per item and no wake-up of this thread per file, which on
        a small machine is CPU the requests need. ``fn`` returns the bytes it moved (passed to
        ``on_done``, one call at a time) or None. The first failure stops the threads taking
        more items, and is raised here once they have stopped."""
        if not items:
            return
        order = iter(range(len(items)))
        lock, report = threading.Lock(), threading.Lock()
        failed: list[BaseException] = []

        def work() -> None:
            while True:
                with lock:
                    i = -1 if failed else next(order, -1)
                if i < 0:
                    return
                try:
                    moved = fn(items[i])
                except BaseException as e:
                    with lock:
                        failed.append(e)
                    return
                if moved is not None and on_done is not None:
                    with report:
                        on_done(moved)

        threads = [threading.Thread(target=work) for _ in range(max(1, min(workers, len(items))))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException as e:  # interrupted: the threads stop after the file at hand
            with lock:
                failed.append(e)
            raise
        if failed:
            raise failed[0]

    @staticmethod
    def _wait(futures: Sequence[Any], sizes: Sequence[int], on_done: OnDone) -> None:
        for fut, size in zip(futures, sizes, strict=True):
            fut.result()
            if on_done is not None:
                on_done(size)

    def _delete_keys(self, keys: Sequence[str]) -> None:
        client = _client()
        for i in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            with s3_errors(self._uri(keys[i])):
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
