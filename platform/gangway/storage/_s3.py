"""The ``s3://`` backend over boto3; parallel transfers through s3transfer's TransferManager.

The endpoint and credentials come from the standard AWS environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, profiles, instance roles, ...). boto3 is imported only when an
``s3://`` URI is used, so ``file://`` steps start fast.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
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
_T = TypeVar("_T")
_clients: dict[tuple[int, str], Any] = {}
_lock = threading.Lock()


def _client(pool: int) -> Any:
    """A process-wide S3 client sized for ``pool`` connections (per endpoint in the env)."""
    cache_key = (pool, os.environ.get("AWS_ENDPOINT_URL", ""))
    with _lock:
        if cache_key not in _clients:
            import boto3
            from botocore.config import Config

            cfg = Config(
                retries={"mode": "standard", "max_attempts": 5},
                max_pool_connections=max(10, pool),
                connect_timeout=10,
                read_timeout=60,
                # Integrity is end to end: every published file's sha256 is in its manifest
                # and is checked after download, so botocore's per-request CRCs are redundant.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
            try:
                _clients[cache_key] = boto3.session.Session().client("s3", config=cfg)
            except ValueError as e:  # e.g. AWS_ENDPOINT_URL is not a URL
                raise PermanentError(
                    f"cannot set up S3: {e}; check AWS_ENDPOINT_URL (e.g. http://127.0.0.1:9000) "
                    "and the AWS profile"
                ) from None
        return _clients[cache_key]


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
                _client(10).head_object(Bucket=self.bucket, Key=key)
        except NotFoundError:
            return False
        return True

    def read_bytes(self) -> bytes:
        key = self.location.key
        with s3_errors(self._uri(key)):
            body = _client(10).get_object(Bucket=self.bucket, Key=key)["Body"]
            data: bytes = body.read()
            return data

    def write_bytes(self, data: bytes) -> None:
        self._put(self.location.key, data)

    def delete(self) -> None:
        keys = [self._key(o.key) for o in self.list_objects()]
        if keys:
            self._delete_keys(keys)

    def download(self, pairs: Sequence[tuple[str, Path]], workers: int, on_done: OnDone) -> None:
        """Files below the location are looked up in one listing first: its sizes and ETags
        route small files to plain GETs and save s3transfer a HeadObject per large one."""
        listing = {o.key: o for o in self._tree()} if any(rel for rel, _ in pairs) else {}
        items = [(self._key(rel), dst, listing.get(rel)) for rel, dst in pairs]
        self._download_files(items, workers, on_done)

    def upload(self, pairs: Sequence[tuple[Path, str]], workers: int, *, move: bool) -> None:
        """Upload the pairs; ``move`` does not apply to S3 (the local files are kept)."""
        self._upload_files([(src, self._key(rel)) for src, rel in pairs], workers)

    def publish_tree(self, tree: TreeCommit) -> None:
        """Delete leftovers of an interrupted publish, upload the files, PUT the marker last.
        Each PUT is atomic on its own, so no race needs ``committed``; ``move`` does not apply.
        """
        wanted = set(tree.rels)
        stale = [o.key for o in self._tree() if o.key not in wanted]
        if stale:  # leftovers of an earlier, interrupted publish
            self._delete_keys([self._key(k) for k in stale])
        pairs = [(tree.src / k, self._key(k)) for k in tree.rels]
        self._upload_files(pairs, tree.workers, tree.on_done)
        self._put(self._key(tree.marker_name), tree.marker)

    def local_dir(self) -> Path | None:
        return None

    def _list(self, prefix: str) -> list[ObjectInfo]:
        client = _client(10)
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
            _client(10).put_object(Bucket=self.bucket, Key=key, Body=data)

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
        self,
        items: Sequence[tuple[str, Path, ObjectInfo | None]],
        workers: int,
        on_done: Callable[[int], None] | None = None,
    ) -> None:
        """Download (key, path, listing) items concurrently; each lands via temp file + rename.

        Objects the listing shows to be small go through one GetObject each on a thread pool
        (s3transfer's per-object task machinery costs more CPU than the request itself for
        them); large or unlisted objects go through s3transfer's TransferManager, which splits
        them into ranged GETs. A listed size and ETag save the HeadObject s3transfer would send.
        """
        for _, dst, _ in items:
            dst.parent.mkdir(parents=True, exist_ok=True)
        small = [(k, p) for k, p, i in items if i is not None and i.size < MULTIPART_THRESHOLD]
        large = [(k, p, i) for k, p, i in items if i is None or i.size >= MULTIPART_THRESHOLD]
        client = _client(workers)

        def get(item: tuple[str, Path]) -> Path:
            key, path = item
            with s3_errors(self._uri(key)):
                data = client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            _write_atomic(path, data)
            return path

        self._pool(get, small, workers, on_done)
        if not large:
            return
        from s3transfer.subscribers import BaseSubscriber

        class _ProvideListing(BaseSubscriber):
            def __init__(self, info: ObjectInfo) -> None:
                self.info = info

            def on_queued(self, future: Any, **kwargs: Any) -> None:
                future.meta.provide_transfer_size(self.info.size)
                future.meta.provide_object_etag(self.info.etag)

        with s3_errors(self._uri(large[0][0])), self._transfer(workers) as manager:
            futures = [
                manager.download(
                    self.bucket,
                    key,
                    str(path),
                    subscribers=[_ProvideListing(info)] if info and info.etag else None,
                )
                for key, path, info in large
            ]
            self._wait(futures, [p for _, p, _ in large], on_done)

    def _upload_files(
        self,
        pairs: Sequence[tuple[Path, str]],
        workers: int,
        on_done: Callable[[int], None] | None = None,
    ) -> None:
        """Upload (path, key) pairs: small files with one PutObject each, large ones multipart."""
        small = [(p, k) for p, k in pairs if p.stat().st_size < MULTIPART_THRESHOLD]
        large = [(p, k) for p, k in pairs if p.stat().st_size >= MULTIPART_THRESHOLD]
        client = _client(workers)

        def put(item: tuple[Path, str]) -> Path:
            path, key = item
            with s3_errors(self._uri(key)):
                client.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
            return path

        self._pool(put, small, workers, on_done)
        if not large:
            return
        with s3_errors(self._uri(large[0][1])), self._transfer(workers) as manager:
            futures = [manager.upload(str(path), self.bucket, key) for path, key in large]
            self._wait(futures, [p for p, _ in large], on_done)

    @staticmethod
    def _pool(
        fn: Callable[[_T], Path],
        items: Sequence[_T],
        workers: int,
        on_done: Callable[[int], None] | None,
    ) -> None:
        if not items:
            return
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for path in pool.map(fn, items):
                if on_done is not None:
                    on_done(path.stat().st_size)

    @staticmethod
    def _wait(
        futures: Sequence[Any], paths: Sequence[Path], on_done: Callable[[int], None] | None
    ) -> None:
        for fut, path in zip(futures, paths, strict=True):
            fut.result()
            if on_done is not None:
                on_done(path.stat().st_size)

    def _delete_keys(self, keys: Sequence[str]) -> None:
        client = _client(10)
        for i in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            with s3_errors(self._uri(keys[i])):
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
