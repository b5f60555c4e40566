"""Image references and pinning them by digest: the reference grammar as a table, the pinned
form, and resolution against a real HTTP registry on 127.0.0.1 (:class:`FakeRegistry`: a token
endpoint, the 401 Bearer challenge, manifests by HEAD and GET), one that is down, and one that
never answers. ``tests/unit/cluster/test_cluster_cmds.py`` submits against the same registry."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gangway.cluster.images import (
    docker_credentials,
    parse_reference,
    pin_image,
    pinned,
    resolve_digest,
)
from gangway.errors import PermanentError, TransientError
from tests.helpers.servers import DIGEST, INDEX, OTHER, FakeRegistry, runtime_registry, serve


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[FakeRegistry]:
    reg = runtime_registry()
    with serve(reg):
        yield reg


@pytest.fixture
def no_docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Credentials come from tmp_path/config.json (absent unless a test writes it)."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    return tmp_path / "config.json"


D = "sha256:" + "0" * 64
HUB = "registry-1.docker.io"
GOOD = [
    ("ubuntu", ("docker.io", "library/ubuntu", None, None), HUB),
    ("ubuntu:22.04", ("docker.io", "library/ubuntu", "22.04", None), HUB),
    ("bitnami/redis:7", ("docker.io", "bitnami/redis", "7", None), HUB),
    ("docker.io/library/ubuntu", ("docker.io", "library/ubuntu", None, None), HUB),
    ("index.docker.io/ubuntu", ("index.docker.io", "library/ubuntu", None, None), HUB),
    ("ghcr.io/gangway/runtime:latest", ("ghcr.io", "gangway/runtime", "latest", None), None),
    ("localhost/app", ("localhost", "app", None, None), None),
    ("localhost:5000/team/app:v1.2-rc_3", ("localhost:5000", "team/app", "v1.2-rc_3", None), None),
    (f"127.0.0.1:5000/a/b/c@{D}", ("127.0.0.1:5000", "a/b/c", None, D), None),
    (
        f"registry.example.com:443/ml/app:v1@{D}",
        ("registry.example.com:443", "ml/app", "v1", D),
        None,
    ),
    ("[::1]:5000/my__app.x-y", ("[::1]:5000", "my__app.x-y", None, None), None),
]


@pytest.mark.parametrize(("text", "parts", "api_host"), GOOD, ids=[g[0][:40] for g in GOOD])
def test_good_references(text: str, parts: tuple[object, ...], api_host: str | None) -> None:
    r = parse_reference(text)
    assert (r.registry, r.repository, r.tag, r.digest) == parts
    assert r.api_host == (api_host or r.registry)


BAD = [
    ("empty", "", "empty"),
    ("whitespace", "ghcr.io/gangway/runtime v1", "whitespace"),
    ("uppercase-path", "Ubuntu:22.04", "must be lowercase"),
    ("uppercase-in-registry-path", "ghcr.io/Gangway/runtime", "must be lowercase"),
    ("empty-tag", "ghcr.io/gangway/runtime:", "tag ''"),
    ("tag-with-slash", "ghcr.io/gangway/runtime:v1/x", "tag 'v1/x'"),
    ("tag-too-long", "app:" + "x" * 129, "up to 128"),
    ("tag-starts-with-dot", "app:.v1", "tag '.v1'"),
    ("short-digest", "ghcr.io/gangway/runtime@sha256:abc", "not sha256:"),
    ("md5-digest", "app@md5:" + "0" * 32, "not sha256:"),
    ("no-path", "ghcr.io/", "no repository path"),
    ("double-slash", "ghcr.io/gangway//runtime", "repository path 'gangway//runtime'"),
    ("trailing-separator", "ghcr.io/gangway/runtime-", "repository path"),
    ("bad-port", "ghcr.io:https/app", "registry 'ghcr.io:https'"),
    ("bad-host", "-bad.example/app", "registry '-bad.example'"),
    ("name-too-long", "a/" + "b" * 300, "at most 255"),
]


@pytest.mark.parametrize(("text", "says"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_references_name_the_reference(text: str, says: str) -> None:
    with pytest.raises(PermanentError) as e:
        parse_reference(text)
    assert str(e.value).startswith(f"image {text!r}: ") and says in str(e.value)


@pytest.mark.parametrize(
    ("ref", "out"),
    [
        ("ghcr.io/gangway/runtime:v1", f"ghcr.io/gangway/runtime:v1@{D}"),
        ("ubuntu", f"ubuntu@{D}"),
        ("localhost:5000/app:v1", f"localhost:5000/app:v1@{D}"),
        (f"app:v1@{D}", f"app:v1@{D}"),
    ],
    ids=["keeps-the-tag", "no-tag", "registry-port", "already-pinned-same"],
)
def test_pinned_keeps_the_name_as_written(ref: str, out: str) -> None:
    assert pinned(ref, D) == out


def test_pinned_refuses_a_bad_or_different_digest() -> None:
    with pytest.raises(PermanentError, match="is not a digest"):
        pinned("app:v1", "sha256:short")
    with pytest.raises(PermanentError, match=r"pinned to .* already"):
        pinned(f"app@{D}", OTHER)


def test_a_pinned_reference_is_returned_without_asking() -> None:
    ref = f"registry.invalid/app:v1@{D}"  # .invalid never resolves: asking would fail
    assert pin_image(ref) == ref
    assert resolve_digest(ref) == D


def test_anonymous_bearer_token_then_head(registry: FakeRegistry, no_docker_config: Path) -> None:
    ref = f"{registry.host}/gangway/runtime:v1"
    assert pin_image(ref) == f"{ref}@{DIGEST}"
    manifests = "/v2/gangway/runtime/manifests/v1"
    assert registry.seen == [
        ("HEAD", manifests, ""),
        ("GET", "/token", ""),
        ("HEAD", manifests, "Bearer token-for-gangway/runtime"),
    ]
    for media in (
        "oci.image.index.v1",
        "docker.distribution.manifest.list.v2",
        "oci.image.manifest.v1",
    ):
        assert all(f"application/vnd.{media}+json" in a for a in registry.accept)


def test_without_a_digest_header_get_hashes_the_manifest(
    registry: FakeRegistry, no_docker_config: Path
) -> None:
    registry.quirks["gangway/runtime"] = "no-head-digest"
    assert resolve_digest(f"{registry.host}/gangway/runtime:v1") == DIGEST
    assert [m for m, path, _ in registry.seen if path != "/token"] == ["HEAD", "HEAD", "GET"]


@pytest.mark.parametrize(
    ("quirk", "error", "says"),
    [
        ("malformed", PermanentError, "malformed Docker-Content-Digest ('sha256:nothex')"),
        ("inconsistent", PermanentError, f"says the manifest is {OTHER} but its bytes are"),
        ("503", TransientError, "answered 503; try again later"),
        ("offsite-realm", PermanentError, "tokens over https only"),
    ],
    ids=["malformed-digest-header", "header-not-the-bytes", "registry-failing", "http-realm"],
)
def test_registry_answers_that_are_errors(
    registry: FakeRegistry,
    no_docker_config: Path,
    quirk: str,
    error: type[Exception],
    says: str,
) -> None:
    registry.quirks["gangway/runtime"] = quirk
    ref = f"{registry.host}/gangway/runtime:v1"
    with pytest.raises(error) as e:
        resolve_digest(ref)
    assert str(e.value).startswith(f"image {ref!r}: ") and says in str(e.value)


def test_a_tag_the_registry_does_not_have(registry: FakeRegistry, no_docker_config: Path) -> None:
    ref = f"{registry.host}/gangway/runtime:v9"
    with pytest.raises(PermanentError) as e:
        pin_image(ref)
    assert f"{registry.host}/gangway/runtime:v9 not found; push the image first" in str(e.value)
    assert "or give it by digest (NAME@sha256:…)" in str(e.value)


def test_private_repository_needs_the_docker_config_login(
    registry: FakeRegistry, no_docker_config: Path
) -> None:
    registry.private["team/secret"] = ("alice", "s3cret")
    registry.manifests[("team/secret", "v1")] = INDEX
    ref = f"{registry.host}/team/secret:v1"
    with pytest.raises(PermanentError, match=f"docker login {registry.host}"):
        resolve_digest(ref)
    auth = base64.b64encode(b"alice:s3cret").decode()
    no_docker_config.write_text(json.dumps({"auths": {f"http://{registry.host}": {"auth": auth}}}))
    assert resolve_digest(ref) == DIGEST
    no_docker_config.write_text(
        json.dumps({"auths": {registry.host: {"username": "alice", "password": "wrong"}}})
    )
    with pytest.raises(PermanentError, match=r"refused a token .* check the credentials"):
        resolve_digest(ref)


def test_basic_challenge_is_answered_with_the_login(
    registry: FakeRegistry, no_docker_config: Path
) -> None:
    registry.quirks["team/basic"] = "basic"
    registry.private["team/basic"] = ("bob", "pw")
    registry.manifests[("team/basic", "v1")] = INDEX
    ref = f"{registry.host}/team/basic:v1"
    with pytest.raises(PermanentError, match="asks for a login"):
        resolve_digest(ref)
    no_docker_config.write_text(
        json.dumps({"auths": {registry.host: {"username": "bob", "password": "pw"}}})
    )
    assert resolve_digest(ref) == DIGEST


def test_docker_config_entries(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    assert docker_credentials("ghcr.io", config) is None  # no file
    hub = base64.b64encode(b"me:tok").decode()
    config.write_text(
        json.dumps(
            {
                "credsStore": "desktop",
                "auths": {"https://index.docker.io/v1/": {"auth": hub}, "ghcr.io": {}},
            }
        )
    )
    assert docker_credentials("docker.io", config) == ("me", "tok")
    assert docker_credentials("ghcr.io", config) is None  # a helper's entry: not run
    config.write_text(json.dumps({"auths": {"ghcr.io": {"auth": "bm9jb2xvbg=="}}}))
    with pytest.raises(PermanentError, match=r"auths\.ghcr\.io\.auth is not base64 of user"):
        docker_credentials("ghcr.io", config)
    config.write_text("{not json")
    with pytest.raises(PermanentError, match="not readable as JSON"):
        docker_credentials("ghcr.io", config)


def test_a_registry_that_is_down(no_docker_config: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ref = f"127.0.0.1:{port}/gangway/runtime:v1"
    with pytest.raises(TransientError) as e:
        pin_image(ref)
    assert f"image {ref!r}: registry 127.0.0.1:{port} unreachable" in str(e.value)


def test_a_registry_that_never_answers(no_docker_config: Path) -> None:
    with socket.socket() as s:  # listens, never accepts: the connection waits
        s.bind(("127.0.0.1", 0))
        s.listen()
        ref = f"127.0.0.1:{s.getsockname()[1]}/gangway/runtime:v1"
        with pytest.raises(TransientError, match=r"unreachable .*timed out"):
            resolve_digest(ref, timeout=0.2)


def test_loopback_registries_are_plain_http_others_https() -> None:
    assert parse_reference("localhost:5000/a:v1").manifest_url.startswith("http://localhost:5000/")
    assert parse_reference("[::1]:5000/a").manifest_url == "http://[::1]:5000/v2/a/manifests/latest"
    assert parse_reference("ubuntu").manifest_url == (
        "https://registry-1.docker.io/v2/library/ubuntu/manifests/latest"
    )
    assert parse_reference("10.0.0.1:5000/a:v1").manifest_url.startswith("https://")
