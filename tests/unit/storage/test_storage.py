"""Storage by URI against a local directory and a real S3 API server (moto, loopback)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gangway import storage
from gangway.errors import NotFoundError, PermanentError, TransientError


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


FILES = {"a.txt": b"alpha\n", "sub/b.bin": bytes(range(256)) * 64, "sub/deep/c.txt": b"c"}


def test_bytes_roundtrip_and_listing(root_uri: str) -> None:
    storage.write_bytes(storage.join(root_uri, "x/one.txt"), b"1")
    storage.write_bytes(storage.join(root_uri, "x/two/three.txt"), b"333")
    assert storage.read_bytes(storage.join(root_uri, "x/one.txt")) == b"1"
    assert storage.exists(storage.join(root_uri, "x/one.txt"))
    assert not storage.exists(storage.join(root_uri, "x/nope.txt"))
    listed = storage.list_objects(storage.join(root_uri, "x"))
    assert [(o.key, o.size) for o in listed] == [("one.txt", 1), ("two/three.txt", 3)]


def test_missing_object_is_not_found(root_uri: str) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        storage.read_bytes(storage.join(root_uri, "nope"))
    assert storage.list_objects(storage.join(root_uri, "empty")) == []


def test_publish_then_fetch_verifies_every_file(root_uri: str, tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", FILES)
    uri = storage.join(root_uri, "ds")
    manifest = storage.publish_dir(src, uri, metadata={"name": "t"})
    assert set(manifest.files) == set(FILES)
    assert manifest.files["sub/b.bin"]["sha256"] == storage.sha256_bytes(FILES["sub/b.bin"])
    got = storage.fetch_dir(uri, tmp_path / "dst")
    assert (got.copied, got.skipped) == (3, 0)
    assert got.manifest.digest == manifest.digest
    assert got.manifest.metadata == {"name": "t"}
    for rel, data in FILES.items():
        assert (tmp_path / "dst" / rel).read_bytes() == data


def test_digest_names_content_not_location(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", FILES)
    a = storage.publish_dir(src, f"file://{tmp_path}/a")
    b = storage.publish_dir(src, f"file://{tmp_path}/b", metadata={"other": 1})
    assert a.digest == b.digest
    (src / "a.txt").write_bytes(b"changed")
    assert storage.build_manifest(src).digest != a.digest


def test_fetch_resumes_and_repairs_local_copies(root_uri: str, tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", FILES)
    uri = storage.join(root_uri, "ds")
    storage.publish_dir(src, uri)
    dst = tmp_path / "dst"
    storage.fetch_dir(uri, dst)
    (dst / "sub/deep/c.txt").unlink()  # interrupted before this file
    (dst / "a.txt").write_bytes(b"alpha, half-writ")  # damaged local copy
    again = storage.fetch_dir(uri, dst)
    assert (again.copied, again.skipped) == (2, 1)
    assert (dst / "a.txt").read_bytes() == FILES["a.txt"]


def test_publish_is_write_once(root_uri: str, tmp_path: Path) -> None:
    uri = storage.join(root_uri, "ds")
    first = storage.publish_dir(_tree(tmp_path / "one", {"f": b"1"}), uri)
    second = storage.publish_dir(_tree(tmp_path / "two", {"f": b"2", "g": b"3"}), uri)
    assert second.digest == first.digest
    assert [o.key for o in storage.list_objects(uri)] == ["_manifest.json", "f"]
    assert storage.read_bytes(storage.join(uri, "f")) == b"1"


def test_partial_directory_is_invisible_and_replaced(root_uri: str, tmp_path: Path) -> None:
    uri = storage.join(root_uri, "ds")
    storage.write_bytes(storage.join(uri, "stale.txt"), b"left by a killed writer")
    assert storage.read_manifest(uri) is None
    with pytest.raises(PermanentError, match="incomplete"):
        storage.fetch_dir(uri, tmp_path / "dst")
    storage.publish_dir(_tree(tmp_path / "src", {"f": b"1"}), uri)
    assert [o.key for o in storage.list_objects(uri)] == ["_manifest.json", "f"]


def test_corrupt_stored_object_is_refused_and_not_left(root_uri: str, tmp_path: Path) -> None:
    uri = storage.join(root_uri, "ds")
    storage.publish_dir(_tree(tmp_path / "src", FILES), uri)
    storage.write_bytes(storage.join(uri, "sub/b.bin"), b"bit rot")
    dst = tmp_path / "dst"
    with pytest.raises(PermanentError, match=r"sub/b.bin.*corrupt"):
        storage.fetch_dir(uri, dst)
    assert not (dst / "sub/b.bin").exists()
    assert (dst / "a.txt").read_bytes() == FILES["a.txt"]


def test_multi_writer_commit(root_uri: str, tmp_path: Path) -> None:
    uri = storage.join(root_uri, "ckpt")
    parts = [
        storage.upload_parts(_tree(tmp_path / f"r{r}", {f"__{r}_0.distcp": bytes([r]) * 10}), uri)
        for r in range(2)
    ]
    assert storage.read_manifest(uri) is None  # not committed yet
    merged = {k: v for p in parts for k, v in p.items()}
    storage.commit_manifest(uri, merged, {"step": 5})
    fetched = storage.fetch_dir(uri, tmp_path / "dst")
    assert sorted(fetched.manifest.files) == ["__0_0.distcp", "__1_0.distcp"]
    assert fetched.manifest.metadata == {"step": 5}


def test_many_files_transfer_in_parallel(root_uri: str, tmp_path: Path) -> None:
    files = {f"d{i % 7}/f{i:04d}.txt": f"file {i}\n".encode() * (i + 1) for i in range(300)}
    uri = storage.join(root_uri, "many")
    seen: list[int] = []
    storage.publish_dir(_tree(tmp_path / "src", files), uri, workers=16, on_done=seen.append)
    assert len(seen) == 300
    got = storage.fetch_dir(uri, tmp_path / "dst", workers=16)
    assert got.copied == 300 and got.bytes_copied == sum(len(v) for v in files.values())


def test_local_publish_never_shows_a_partial_directory(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", FILES)
    dst = tmp_path / "out" / "ds"
    storage.publish_dir(src, str(dst), move=True)
    assert not src.exists()  # renamed into place, not copied
    assert sorted(p.name for p in dst.parent.iterdir()) == ["ds"]  # no temporaries left
    assert json.loads((dst / storage.MANIFEST_NAME).read_text())["version"] == 1


def _publish_race(dst: Path, srcs: list[Path]) -> tuple[list[BaseException], list[str]]:
    """Publish every ``srcs`` to ``dst`` at once while a reader watches the committed tree:
    what the publishers raised, and the files the reader saw go once committed."""
    import threading

    errors: list[BaseException] = []
    gone: list[str] = []
    done = threading.Event()

    def publish(src: Path, move: bool) -> None:
        try:
            storage.publish_dir(src, str(dst), move=move)
        except BaseException as e:
            errors.append(e)

    def read() -> None:
        while not done.is_set():
            if (dst / storage.MANIFEST_NAME).exists():
                gone.extend(r for r in FILES if not (dst / r).exists())

    reader = threading.Thread(target=read)
    reader.start()
    threads = [
        threading.Thread(target=publish, args=(src, i % 2 == 0)) for i, src in enumerate(srcs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    return errors, gone


def test_concurrent_identical_local_publishes_never_delete_a_committed_tree(
    tmp_path: Path,
) -> None:
    """Several runs staging the same dataset at once (one state dir): each publish used to
    remove what it took for a partial leftover — sometimes a tree another had just committed,
    under its readers. Now every publisher succeeds, and a reader never sees it go."""
    dst = tmp_path / "out" / "ds"
    for round_ in range(12):
        if dst.exists():
            shutil.rmtree(dst)
        _tree(dst, {"partial.txt": b"left by a killed publisher"})  # no manifest: a leftover
        srcs = [_tree(tmp_path / f"src{round_}-{i}", FILES) for i in range(4)]
        errors, gone = _publish_race(dst, srcs)
        assert errors == [] and gone == [], (errors, gone)
        assert sorted(p.name for p in dst.parent.iterdir()) == ["ds"]  # no temporaries left
        files = sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
        assert files == sorted([*FILES, storage.MANIFEST_NAME])


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        pytest.param("ftp://host/x", "unsupported scheme 'ftp'", id="unknown-scheme"),
        pytest.param("file://relative/path", "three slashes", id="file-uri-not-absolute"),
        pytest.param("s3:///key", "needs a bucket", id="s3-without-bucket"),
        pytest.param("", "empty URI", id="empty"),
    ],
)
def test_bad_uris_say_what_to_write(uri: str, message: str) -> None:
    with pytest.raises(PermanentError, match=message):
        storage.read_bytes(uri)


def test_unreachable_s3_endpoint_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(TransientError, match="cannot reach the S3 endpoint"):
        storage.read_bytes("s3://bucket/key")


HOSTILE = [
    pytest.param("run#2/shard.jsonl", "'#' is not allowed", id="hash-would-drop-the-rest"),
    pytest.param("run?x=1/shard.jsonl", "'?' is not allowed", id="query-would-drop-the-rest"),
    pytest.param("a/../../escape.txt", "'..' path segments", id="dotdot-escapes-the-prefix"),
    pytest.param("a/./b.txt", "'.' path segments", id="dot-segment"),
    pytest.param("a//b.txt", "empty path segment", id="double-slash"),
    pytest.param("line\nbreak.txt", "control characters", id="newline-in-key"),
    pytest.param("tab\there.txt", "control characters", id="tab-in-key"),
]


@pytest.mark.parametrize(("rel", "message"), HOSTILE)
def test_hostile_uris_are_refused_alike_on_both_backends(
    root_uri: str, rel: str, message: str
) -> None:
    """The same rule on file:// and s3://: refused with a message naming the character, and
    nothing is written anywhere (before this rule, '#' wrote …/run instead of …/run#2/…)."""
    uri = f"{root_uri}/{rel}"
    for op in (
        lambda: storage.write_bytes(uri, b"x"),
        lambda: storage.read_bytes(uri),
        lambda: storage.list_objects(uri),
        lambda: storage.delete(uri),
    ):
        with pytest.raises(PermanentError, match=re.escape(message)):
            op()
    assert storage.list_objects(root_uri) == []


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        pytest.param("s3://My_Bucket/x", "not a valid S3 bucket name", id="bucket-uppercase"),
        pytest.param("s3://b/x", "not a valid S3 bucket name", id="bucket-too-short"),
        pytest.param("s3://user:pw@bucket/x", "not a valid S3 bucket name", id="credentials"),
        pytest.param("s3:///key", "needs a bucket", id="no-bucket"),
        pytest.param("file://host/x", "three slashes", id="file-with-host"),
        pytest.param("gs://bucket/x", "unsupported scheme", id="unknown-scheme"),
        pytest.param("", "empty URI", id="empty"),
        pytest.param("/tmp/state#2/storage", "'#' is not allowed", id="bare-path-with-hash"),
    ],
)
def test_malformed_uris_name_the_problem(uri: str, message: str) -> None:
    with pytest.raises(PermanentError, match=re.escape(message)):
        storage.parse(uri)


def test_uris_are_literal_and_a_trailing_slash_is_fine(tmp_path: Path) -> None:
    assert storage.parse(f"file://{tmp_path}/a%23b").path == tmp_path / "a%23b"
    assert storage.parse("s3://bucket-1/a%20b/").key == "a%20b/"
    assert storage.parse("s3://my.bucket/x").bucket == "my.bucket"
    assert storage.parse(f"file://localhost{tmp_path}/x").path == tmp_path / "x"


def test_unwritable_local_root_is_one_clear_permanent_error() -> None:
    with pytest.raises(PermanentError, match=r"cannot write file:///proc/nope/x: .*check the path"):
        storage.write_bytes("file:///proc/nope/x", b"1")
