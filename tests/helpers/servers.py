"""Helpers."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_bucket(endpoint: str) -> str:
    import boto3

    name = f"gw-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


def start_mlflow_server(root: Path, port: int) -> subprocess.Popen[bytes]:
    """A real MLflow tracking server (sqlite under ``root``) on 127.0.0.1:``port``, healthy."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root}/mlflow.db",
            "--default-artifact-root",
            f"file://{root}/artifacts",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=(root / "server.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    import urllib.request

    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(
                    "mlflow server did not start: " + (root / "server.log").read_text()[-2000:]
                ) from None
            time.sleep(0.25)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


INDEX = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [],
    }
).encode()


DIGEST = "sha256:" + hashlib.sha256(INDEX).hexdigest()


OTHER = "sha256:" + "ab" * 32


@dataclass
class FakeRegistry:
    """The subset of the OCI distribution API Gangway asks, served from memory.

    Every repository challenges for a Bearer token (``/token``, anonymous unless the repository
    is in ``private``); ``quirks`` bend one repository's answers: ``no-head-digest`` (no
    Docker-Content-Digest on any answer: a GET must hash the bytes), ``malformed`` (a
    malformed one), ``inconsistent`` (GET's header is not the bytes' digest), ``basic`` (a
    Basic challenge), ``offsite-realm`` (a token realm over plain http off the loopback),
    ``503``."""

    manifests: dict[tuple[str, str], bytes] = field(default_factory=dict)
    private: dict[str, tuple[str, str]] = field(default_factory=dict)
    quirks: dict[str, str] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    """``(method, path, Authorization)`` of every request, in order."""
    accept: list[str] = field(default_factory=list)
    host: str = ""

    def manifest(
        self, repo: str, method: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        name, _, ref = repo.partition("/manifests/")
        quirk = self.quirks.get(name, "")
        auth = headers.get("Authorization", "")
        if quirk == "basic":
            user, password = self.private[name]
            want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if auth != want:
                return 401, {"WWW-Authenticate": 'Basic realm="fake"'}, b""
        elif auth != f"Bearer token-for-{name}":
            realm = (
                "http://registry.invalid/token"
                if quirk == "offsite-realm"
                else f"http://{self.host}/token"
            )
            challenge = f'Bearer realm="{realm}",service="fake",scope="repository:{name}:pull"'
            return 401, {"WWW-Authenticate": challenge}, b""
        if quirk == "503":
            return 503, {}, b""
        body = self.manifests.get((name, ref))
        if body is None:
            error = {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
            return 404, {"Content-Type": "application/json"}, json.dumps(error).encode()
        out = {"Content-Type": "application/vnd.oci.image.index.v1+json"}
        real = "sha256:" + hashlib.sha256(body).hexdigest()
        digest = {"malformed": "sha256:nothex", "no-head-digest": ""}.get(quirk, real)
        if quirk == "inconsistent":
            digest = "" if method == "HEAD" else OTHER
        if digest:
            out["Docker-Content-Digest"] = digest
        return 200, out, body

    def token(self, query: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        scope = parse_qs(query).get("scope", [""])[0]
        name = scope.removeprefix("repository:").removesuffix(":pull")
        if name in self.private:
            user, password = self.private[name]
            want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if headers.get("Authorization") != want:
                return 401, {}, b'{"details": "incorrect username or password"}'
        return 200, {}, json.dumps({"token": f"token-for-{name}"}).encode()


@contextmanager
def serve(registry: FakeRegistry) -> Iterator[str]:
    """Serve ``registry`` on 127.0.0.1 in a thread; yields its ``HOST:PORT``."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            url = urlsplit(self.path)
            headers = dict(self.headers.items())
            registry.seen.append((self.command, url.path, headers.get("Authorization", "")))
            if url.path == "/token":
                status, out, body = registry.token(url.query, headers)
            elif url.path.startswith("/v2/") and "/manifests/" in url.path:
                registry.accept.append(headers.get("Accept", ""))
                status, out, body = registry.manifest(url.path[4:], self.command, headers)
            else:
                status, out, body = 404, {}, b""
            self.send_response(status)
            for k, v in out.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = _answer  # noqa: N815  (http.server's names)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    registry.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield registry.host
    finally:
        server.shutdown()
        server.server_close()


def runtime_registry() -> FakeRegistry:
    """A registry holding ``gangway/runtime:v1`` (an OCI index whose digest is DIGEST)."""
    return FakeRegistry(manifests={("gangway/runtime", "v1"): INDEX})


PROMETHEUS_INSTALL = "apt-get install prometheus (Debian's package; it brings promtool)"


def prometheus_binary(name: str = "prometheus") -> str:
    """The path of Debian's ``prometheus`` (or ``promtool``); the test skips, naming the
    install command, where it is absent."""
    import shutil

    import pytest

    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: {PROMETHEUS_INSTALL}")
    return found


@contextmanager
def prometheus_server(
    root: Path,
    targets: list[str],
    interval: str = "1s",
    rules: Path | None = None,
    evaluation_interval: str | None = None,
) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 scraping ``targets`` (``HOST:PORT``, their ``/metrics``)
    every ``interval``, its data under ``root``; yields its URL once it is ready. ``rules``: a
    rule file it evaluates every ``evaluation_interval`` (default: ``interval``)."""
    import urllib.request

    binary = prometheus_binary()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {
                    "scrape_interval": interval,
                    "evaluation_interval": evaluation_interval or interval,
                },
                "rule_files": [str(rules)] if rules is not None else [],
                "scrape_configs": [
                    {"job_name": "gangway", "static_configs": [{"targets": targets}]}
                ],
            }
        )
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(root / "prometheus.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (root / "prometheus.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"prometheus did not start:\n{log}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
