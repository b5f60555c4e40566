"""The OCI distribution API as :mod:`gangway.cluster.images` uses it: one image's manifest, over
HTTPS (plain HTTP on the loopback), answering a 401's Basic or Bearer challenge once. The thin I/O
layer: what to ask and what an answer means is in :mod:`gangway.cluster.images`."""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from pathlib import Path
from typing import NamedTuple, Protocol

from gangway.errors import PermanentError, TransientError

__all__ = ["ACCEPT", "MAX_MANIFEST", "Image", "Response", "Session", "is_loopback", "request"]


class Image(Protocol):
    """What the API needs of an image reference (:class:`gangway.cluster.images.ImageRef`)."""

    @property
    def text(self) -> str: ...
    @property
    def registry(self) -> str: ...
    @property
    def repository(self) -> str: ...
    @property
    def tag(self) -> str | None: ...
    @property
    def api_host(self) -> str: ...
    @property
    def manifest_url(self) -> str: ...


ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
"""The manifest media types asked for, indexes first (what ``docker pull`` resolves)."""
MAX_MANIFEST = 4 * 1024 * 1024
"""Registries refuse larger manifests (OCI distribution spec); a larger answer is not one."""


def is_loopback(host: str) -> bool:
    name = (host if host.endswith("]") else host.rsplit(":", 1)[0]).strip("[]")
    try:
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Response(NamedTuple):
    status: int
    headers: Message
    body: bytes


def request(url: str, method: str, headers: dict[str, str], timeout: float, what: str) -> Response:
    """One HTTP request; an answer of any status, or a :class:`TransientError` without one."""
    req = urllib.request.Request(url, method=method)
    for k, v in headers.items():  # credentials do not follow a redirect to another host
        (req.add_unredirected_header if k == "Authorization" else req.add_header)(k, v)
    host = urllib.parse.urlsplit(url).netloc
    # no proxy for a loopback registry: it is on this machine
    handlers = [urllib.request.ProxyHandler({})] if is_loopback(host) else []
    try:
        with urllib.request.build_opener(*handlers).open(req, timeout=timeout) as resp:
            return Response(resp.status, resp.headers, _read(resp, method, what))
    except urllib.error.HTTPError as e:
        with e:
            return Response(e.code, e.headers, _read(e, method, what))
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or repr(e)
        raise TransientError(
            f"{what} unreachable ({reason}); check the address and the network, then try again"
        ) from None


def _read(resp: http.client.HTTPResponse | urllib.error.HTTPError, method: str, what: str) -> bytes:
    if method == "HEAD":
        return b""
    body = resp.read(MAX_MANIFEST + 1)
    if len(body) > MAX_MANIFEST:
        raise PermanentError(f"{what}: answered more than {MAX_MANIFEST} bytes; not a manifest")
    return body


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    """``WWW-Authenticate: Scheme k="v",k=v`` as ``("scheme", {k: v})``."""
    scheme, _, rest = header.strip().partition(" ")
    pairs = re.findall(r'(\w+)\s*=\s*(?:"([^"]*)"|([^,\s]*))', rest)
    return scheme.lower(), {k.lower(): quoted or bare for k, quoted, bare in pairs}


def _registry_message(body: bytes) -> str:
    """The first message of a registry's JSON error body (``{"errors": [{"message": …}]}``)."""
    try:
        errors = json.loads(body).get("errors") or []
        return f": {errors[0].get('code', '')} {errors[0].get('message', '')}".rstrip()
    except (ValueError, AttributeError, IndexError, TypeError):
        return ""


class Session:
    """Requests for one image's manifest, with the authorization a challenge earned."""

    def __init__(
        self, r: Image, timeout: float, creds: tuple[str, str] | None, config: Path
    ) -> None:
        self.r, self.timeout, self.creds, self.config = r, timeout, creds, config
        self.authorization: str | None = None

    def fetch(self, method: str) -> Response:
        """The manifest (HEAD or GET), authorizing once on a 401; an error for any non-200."""
        got = self._send(method)
        if got.status == 401 and self.authorization is None:
            self.authorization = self._authorize(got.headers.get("WWW-Authenticate") or "")
            got = self._send(method)
        if got.status != 200:
            raise self._refusal(got)
        return got

    def _send(self, method: str) -> Response:
        headers = {"Accept": ACCEPT}
        if self.authorization:
            headers["Authorization"] = self.authorization
        what = f"image {self.r.text!r}: registry {self.r.api_host}"
        return request(self.r.manifest_url, method, headers, self.timeout, what)

    def _login_hint(self) -> str:
        if self.creds:
            return f"check the credentials for {self.r.registry} in {self.config}"
        return (
            f"log in (`docker login {self.r.registry}`; Gangway reads the auths of {self.config})"
        )

    def _refusal(self, got: Response) -> PermanentError | TransientError:
        r, status, msg = self.r, got.status, _registry_message(got.body)
        where = f"{r.registry}/{r.repository}"
        if status == 404:
            return PermanentError(
                f"image {r.text!r}: {where}:{r.tag or 'latest'} not found{msg}; push the image "
                "first, or give it by digest (NAME@sha256:…)"
            )
        if status in (401, 403):
            return PermanentError(
                f"image {r.text!r}: {r.api_host} refused access to {where} ({status}{msg}); "
                f"check the name, or {self._login_hint()}"
            )
        if status == 429 or status >= 500:
            return TransientError(
                f"image {r.text!r}: {r.api_host} answered {status}{msg}; try again later"
            )
        return PermanentError(f"image {r.text!r}: {r.api_host} answered {status}{msg}")

    def _authorize(self, header: str) -> str:
        """What the 401's challenge asks for: Basic with the credentials, or a Bearer token
        from the challenge's realm (anonymous, or with the credentials)."""
        r, (scheme, params) = self.r, _challenge(header)
        creds = ":".join(self.creds).encode() if self.creds else b""
        basic = f"Basic {base64.b64encode(creds).decode()}" if creds else ""
        if scheme == "basic" and basic:
            return basic
        realm = params.get("realm", "")
        if scheme != "bearer" or not realm:
            raise PermanentError(
                f"image {r.text!r}: {r.api_host} asks for a login ({header or 'no challenge'}); "
                + self._login_hint()
            )
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.netloc)):
            raise PermanentError(
                f"image {r.text!r}: {r.api_host} sends for a token to {realm!r}; Gangway asks "
                "for tokens over https only (plain http on the loopback)"
            )
        scope = params.get("scope") or f"repository:{r.repository}:pull"
        query = {"service": params.get("service", ""), "scope": scope}
        url = f"{realm}{'&' if parts.query else '?'}"
        url += urllib.parse.urlencode({k: v for k, v in query.items() if v})
        what = f"image {r.text!r}: token service {parts.netloc}"
        got = request(url, "GET", {"Authorization": basic} if basic else {}, self.timeout, what)
        if got.status in (401, 403):
            raise PermanentError(
                f"{what} refused a token for {scope} ({got.status}); check the name, or "
                + self._login_hint()
            )
        if got.status != 200:
            err = TransientError if got.status == 429 or got.status >= 500 else PermanentError
            raise err(f"{what} answered {got.status}{_registry_message(got.body)}")
        try:
            answer = json.loads(got.body)
            token = answer.get("token") or answer.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise PermanentError(f"{what} answered no token (want JSON with 'token')")
        return f"Bearer {token}"
