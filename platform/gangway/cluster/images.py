"""Container image references, and pinning them by digest.

A reference is ``[HOST[:PORT]/]PATH[:TAG][@DIGEST]``, read as Docker reads it
(``distribution/reference``): the first ``/``-component is the registry when it has a ``.`` or
a ``:`` or is ``localhost``; else the image is on Docker Hub (``docker.io``, served by
``registry-1.docker.io``) and a one-component path gets ``library/``.

**Pinned form**: ``NAME:TAG@sha256:…`` — the tag is kept (as Renovate pins) so the lineage and
the Argo UI still say which tag it was; containerd, CRI-O and Docker pull by the digest and
ignore the tag. A reference without a tag pins as ``NAME@sha256:…``.

**Resolution** (:func:`resolve_digest`), over the OCI distribution API: ``HEAD
/v2/<path>/manifests/<tag>`` accepting an OCI index or manifest and a Docker manifest list or
manifest (a multi-arch image pins its index; each node still pulls its own platform), reading
``Docker-Content-Digest``; without one, a GET hashes the manifest's bytes. A ``401`` with
``WWW-Authenticate: Bearer realm=…,service=…,scope=…`` is answered with a token from the realm
(anonymous, or with the credentials below); a ``Basic`` challenge with the credentials. Always
HTTPS, except plain HTTP for a registry on the loopback (``localhost``, ``127.0.0.0/8``,
``[::1]``), as Docker allows an insecure registry on localhost.

**Credentials**: the ``auths`` of ``$DOCKER_CONFIG/config.json`` (else
``~/.docker/config.json``) as ``docker login`` writes them (``auth``: base64 of
``user:password``, or ``username`` and ``password``), sent as Basic auth to the token realm or
to a registry that asks, never over plain HTTP off the loopback. Credential helpers
(``credsStore``, ``credHelpers``) are not run: without an entry, the pull is anonymous.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from gangway.cluster.registry import Response, Session, is_loopback
from gangway.errors import PermanentError

__all__ = [
    "ImageRef",
    "docker_config_path",
    "docker_credentials",
    "parse_reference",
    "pin_image",
    "pinned",
    "resolve_digest",
]

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?")
_TAG = re.compile(r"\w[\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")
_EXAMPLE = "e.g. ghcr.io/team/app:v1 or ghcr.io/team/app@sha256:<64 hex digits>"


@dataclass(frozen=True)
class ImageRef:
    """An image reference, parsed (:func:`parse_reference`)."""

    text: str
    """As written."""
    name: str
    """Registry and path as written, without tag or digest (``ubuntu``, ``ghcr.io/a/b``)."""
    registry: str
    """``HOST[:PORT]`` as written, ``docker.io`` when none is."""
    repository: str
    """The path on the registry (``library/ubuntu`` for ``ubuntu``)."""
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        """Where the registry's API answers (Docker Hub's is not ``docker.io``)."""
        hub = self.registry in (DOCKER_HUB, "index.docker.io")
        return DOCKER_HUB_API if hub else self.registry

    @property
    def manifest_url(self) -> str:
        """``/v2/<path>/manifests/<digest, tag or latest>`` on the registry."""
        scheme = "http" if is_loopback(self.api_host) else "https"
        ref = self.digest or self.tag or "latest"
        return f"{scheme}://{self.api_host}/v2/{self.repository}/manifests/{ref}"


def parse_reference(text: str) -> ImageRef:
    """``text`` as an image reference; a :class:`PermanentError` naming it and what is wrong."""

    def bad(why: str) -> PermanentError:
        return PermanentError(f"image {text!r}: {why}")

    if not text or any(c.isspace() for c in text):
        raise bad(f"{'empty' if not text else 'contains whitespace'}; give NAME[:TAG], {_EXAMPLE}")
    rest, at, digest = text.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        raise bad(f"digest {digest!r} is not sha256: and 64 lowercase hex digits")
    first, slash, after = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.fullmatch(first):
            raise bad(f"registry {first!r} is not a host name or HOST:PORT")
        registry, path = first, after
    else:
        registry, path = DOCKER_HUB, rest
    path, colon, tag = path.partition(":")
    if not path:
        raise bad(f"no repository path; {_EXAMPLE}")
    if path.lower() != path:
        raise bad(f"repository path {path!r} must be lowercase")
    if not _PATH.fullmatch(path):
        raise bad(
            f"repository path {path!r}: /-separated components of lowercase letters and digits, "
            "joined within a component by '.', '_', '__' or '-'"
        )
    if colon and not _TAG.fullmatch(tag):
        raise bad(
            f"tag {tag!r}: up to 128 letters, digits, '_', '.' or '-', not starting with . or -"
        )
    name = rest.removesuffix(f":{tag}") if colon else rest
    if len(name) > 255:
        raise bad(f"name is {len(name)} characters; at most 255")
    if registry in (DOCKER_HUB, "index.docker.io") and "/" not in path:
        path = f"library/{path}"
    return ImageRef(text, name, registry, path, tag if colon else None, digest if at else None)


def _parsed(ref: str | ImageRef) -> ImageRef:
    return parse_reference(ref) if isinstance(ref, str) else ref


def pinned(ref: str | ImageRef, digest: str) -> str:
    """``ref`` pinned by ``digest``: ``NAME:TAG@DIGEST`` (the tag kept, see the module)."""
    r = _parsed(ref)
    if not _DIGEST.fullmatch(digest):
        raise PermanentError(f"image {r.text!r}: {digest!r} is not a digest (sha256:<64 hex>)")
    if r.digest and r.digest != digest:
        raise PermanentError(f"image {r.text!r} is pinned to {r.digest} already, not {digest}")
    return f"{r.name}{f':{r.tag}' if r.tag else ''}@{digest}"


def pin_image(
    ref: str | ImageRef, *, timeout: float = 10.0, docker_config: Path | None = None
) -> str:
    """``ref`` pinned by its digest on the registry; a reference that has a digest already is
    returned unchanged, without asking the registry."""
    r = _parsed(ref)
    if r.digest:
        return r.text
    return pinned(r, resolve_digest(r, timeout=timeout, docker_config=docker_config))


def resolve_digest(
    ref: str | ImageRef, *, timeout: float = 10.0, docker_config: Path | None = None
) -> str:
    """The digest (``sha256:…``) of the manifest the registry serves for ``ref`` (see the
    module). ``docker_config`` overrides where credentials are read; ``timeout`` is per
    request. :class:`TransientError` for an unreachable or failing registry,
    :class:`PermanentError` for a tag or repository it does not have, or a refused login."""
    r = _parsed(ref)
    if r.digest:
        return r.digest
    config = docker_config or docker_config_path()
    session = Session(r, timeout, docker_credentials(r.registry, config), config)
    digest = _header_digest(session.fetch("HEAD").headers)
    if _DIGEST.fullmatch(digest):
        return digest
    return _body_digest(r, session.fetch("GET"))


def docker_config_path() -> Path:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json`` (as ``docker`` reads it)."""
    base = os.environ.get("DOCKER_CONFIG")
    return Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"


def docker_credentials(registry: str, config: Path | None = None) -> tuple[str, str] | None:
    """``(user, password)`` for ``registry`` from the ``auths`` of a Docker config (default
    :func:`docker_config_path`); None without a file or an entry."""
    path = config or docker_config_path()
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise PermanentError(f"{path}: not readable as JSON ({e}); fix or move it") from None
    auths = raw.get("auths") if isinstance(raw, dict) else None
    hub = registry in (DOCKER_HUB, "index.docker.io")
    wanted = {DOCKER_HUB, "index.docker.io", DOCKER_HUB_API} if hub else {registry.lower()}
    for key, entry in (auths if isinstance(auths, dict) else {}).items():
        host = str(key).split("://", 1)[-1].split("/", 1)[0].lower()
        if host not in wanted or not isinstance(entry, dict):
            continue
        if entry.get("auth"):
            try:
                user, colon, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                colon = ""
            if not colon:
                raise PermanentError(f"{path}: auths.{key}.auth is not base64 of user:password")
            return user, password
        if entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
    return None


def _header_digest(headers: Message) -> str:
    """The ``Docker-Content-Digest`` header as sent (empty if absent)."""
    return (headers.get("Docker-Content-Digest") or "").strip()


def _body_digest(r: ImageRef, got: Response) -> str:
    """The manifest's digest from its bytes, checked against the header when there is one."""
    header = _header_digest(got.headers)
    if header and not _DIGEST.fullmatch(header):
        raise PermanentError(
            f"image {r.text!r}: {r.api_host} sent a malformed Docker-Content-Digest "
            f"({header!r}); give the image by digest (NAME@sha256:…) or fix the registry"
        )
    if not got.body:
        raise PermanentError(f"image {r.text!r}: {r.api_host} sent an empty manifest")
    algorithm = header.split(":", 1)[0] if header else "sha256"
    computed = f"{algorithm}:{hashlib.new(algorithm, got.body).hexdigest()}"
    if header and header != computed:
        raise PermanentError(
            f"image {r.text!r}: {r.api_host} says the manifest is {header} but its bytes are "
            f"{computed}; the registry is inconsistent: give the image by digest (NAME@sha256:…)"
        )
    return computed
