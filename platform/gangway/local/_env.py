"""A container's environment, locally: its ``env`` values, and ``valueFrom`` references
resolved on this machine — secrets from the local secrets directory or the environment,
``fieldRef`` from the pod's own facts.

A secret ``NAME`` with key ``KEY`` is the file ``SECRETS_DIR/NAME/KEY`` (the layout of a
mounted Kubernetes secret), else the environment variable ``GANGWAY_SECRET_NAME_KEY``
(upper-cased, every other character ``_``). A missing one is an error naming the secret, the
key and both places, found before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.errors import PermanentError

__all__ = ["Secrets", "env_var_name", "resolve_env", "secret_refs"]


def env_var_name(secret: str, key: str) -> str:
    """The environment variable that may hold ``secret``'s ``key``."""
    return "GANGWAY_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", f"{secret}_{key}").upper()


@dataclass(frozen=True)
class Secrets:
    """Where a local run finds secrets."""

    directory: Path | None
    environ: Mapping[str, str]

    def value(self, secret: str, key: str) -> str | None:
        if self.directory is not None:
            path = self.directory / secret / key
            if path.is_file():
                return path.read_text()
        return self.environ.get(env_var_name(secret, key))

    def missing(self, secret: str, key: str) -> str:
        where = f"{self.directory}/{secret}/{key}" if self.directory else "(no --secrets-dir)"
        return (
            f"secret {secret!r} key {key!r} is not on this machine: write it to {where} or "
            f"set {env_var_name(secret, key)}"
        )

    def directory_of(self, secret: str) -> Path:
        """A secret mounted as a volume: its directory."""
        if self.directory is None or not (self.directory / secret).is_dir():
            where = self.directory or "the --secrets-dir"
            raise PermanentError(
                f"secret volume {secret!r}: no directory {where}/{secret} with its keys"
            )
        return self.directory / secret


def secret_refs(containers: list[Mapping[str, Any]]) -> Iterator[tuple[str, str, bool]]:
    """``(secret, key, optional)`` for every ``secretKeyRef`` in the containers' env."""
    for c in containers:
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                yield str(ref.get("name", "")), str(ref.get("key", "")), bool(ref.get("optional"))


def resolve_env(
    container: Mapping[str, Any], secrets: Secrets, pod: Mapping[str, str]
) -> dict[str, str]:
    """The container's ``env`` as name → value (``pod``: ``metadata.name`` and other field
    paths a ``fieldRef`` may name)."""
    out: dict[str, str] = {}
    for e in container.get("env") or []:
        name, source = str(e["name"]), e.get("valueFrom")
        if source is None:
            out[name] = _expand(str(e.get("value", "")), out)
            continue
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = secrets.value(str(ref.get("name")), str(ref.get("key")))
            if value is None and not ref.get("optional"):
                raise PermanentError(f"env {name}: {secrets.missing(ref['name'], ref['key'])}")
            if value is not None:
                out[name] = value
        elif "fieldRef" in source:
            out[name] = pod.get(str(source["fieldRef"].get("fieldPath")), "")
    return out


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` in an env value: an earlier variable of the same container."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), value)
