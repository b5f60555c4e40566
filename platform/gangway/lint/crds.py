"""CRD schemas: loaded from a directory of CRD YAML files or from a live cluster, and turned
into JSON Schema for the ``jsonschema`` library.

Kubernetes' structural-schema extensions are honoured: ``x-kubernetes-int-or-string`` accepts
an integer or a string; ``x-kubernetes-preserve-unknown-fields`` keeps unknown fields;
everywhere else an object with declared ``properties`` rejects unknown fields, as the API
server's pruning would silently drop them — a typo is an error here, not a lost setting.

Reading the upstream CRDs (5 MB of YAML) and checking their schemas takes seconds, on every
``lint``, ``submit`` and ``run`` that uses them: a directory's schemas, once converted and
checked, are kept as JSON in the user's cache directory (``GANGWAY_CACHE_DIR``, else
``$XDG_CACHE_HOME/gangway`` or ``~/.cache/gangway``), keyed by each file's path, size and
modification time — a changed file is read again — and reused within a process. A cache that
cannot be written or read is passed over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gangway.errors import GangwayError, NotFoundError, PermanentError
from gangway.storage import write_atomic

__all__ = ["CrdSchemas", "to_json_schema"]

_DROP = {
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-embedded-resource",
    "format",
}
"""Schema *keywords* left out of the JSON Schema (with every other ``x-kubernetes-*``)."""

_NAMED = {"properties", "patternProperties"}
"""Keywords whose keys are field names, each mapped to a schema: a field may be called
``format`` (``withSequence.format``) and must stay."""

_DATA = {"default", "enum", "example", "const"}
"""Keywords whose values are data, not schemas: kept as they are."""

_TRANSLATION = 2
"""The version of :func:`to_json_schema`'s output, part of the cache's key."""

_GO_FLAGS = re.compile(r"^\^\(\?([a-zA-Z]+)\)")
"""A Go (RE2) pattern's flags after its ``^`` (``^(?i)(abort|warn)?$``, prometheus-operator):
Python takes global flags only at the start."""


def to_json_schema(node: Any) -> Any:
    """Translate one OpenAPI v3 (structural) schema node to JSON Schema."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in _DROP or k.startswith("x-kubernetes-"):
            continue
        if k == "pattern" and isinstance(v, str):
            out[k] = _GO_FLAGS.sub(r"(?\1)^", v)
        elif k in _NAMED and isinstance(v, dict):
            out[k] = {name: to_json_schema(s) for name, s in v.items()}
        else:
            out[k] = v if k in _DATA else to_json_schema(v)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable"):
        out.pop("nullable", None)
        if "type" in out:
            out["type"] = [out["type"], "null"]
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


@dataclass
class CrdSchemas:
    """JSON Schemas by (apiVersion, kind)."""

    schemas: dict[tuple[str, str], dict[str, Any]]
    source: str
    _validators: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    checked: set[tuple[str, str]] = field(default_factory=set, repr=False)
    """The kinds whose schema passed the meta-schema check (kept in the cache)."""
    cache: Path | None = field(default=None, repr=False)
    """Where these schemas are cached, when they come from a directory."""

    def get(self, api_version: str, kind: str) -> dict[str, Any] | None:
        return self.schemas.get((api_version, kind))

    def validator(self, api_version: str, kind: str) -> Any:
        """A (cached) jsonschema validator for the kind, or None without a CRD for it."""
        key = (api_version, kind)
        if key not in self.schemas:
            return None
        if key not in self._validators:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            if key not in self.checked:
                try:  # a damaged CRD must not read as findings on the manifest, or crash
                    Draft202012Validator.check_schema(self.schemas[key])
                except SchemaError as e:
                    raise self.broken(api_version, kind, e.message) from None
                self.checked.add(key)
                self._save()
            self._validators[key] = Draft202012Validator(self.schemas[key])
        return self._validators[key]

    def broken(self, api_version: str, kind: str, why: str) -> PermanentError:
        """The error for a CRD in :attr:`source` whose schema cannot be used."""
        return PermanentError(
            f"{self.source}: the CRD schema of {api_version} {kind} is broken ({why}); put the "
            "upstream CRD file there"
        )

    @classmethod
    def from_documents(cls, docs: Iterable[Any], source: str) -> CrdSchemas:
        schemas: dict[tuple[str, str], dict[str, Any]] = {}
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            try:
                spec = doc["spec"]
                for version in spec.get("versions", []):
                    raw = (version.get("schema") or {}).get("openAPIV3Schema")
                    if raw:
                        key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                        schemas[key] = to_json_schema(raw)
            except (KeyError, TypeError, AttributeError) as e:  # not a CRD's shape
                name = (doc.get("metadata") or {}).get("name", "?")
                raise PermanentError(
                    f"{source}: CustomResourceDefinition {name!r} is not shaped as one "
                    f"({type(e).__name__}: {e}); put the upstream CRD file there"
                ) from None
        if not schemas:
            raise PermanentError(f"{source}: no CustomResourceDefinition with an openAPIV3Schema")
        return cls(schemas, source)

    @classmethod
    def from_dir(cls, path: Path, *, named: str = "--crds ") -> CrdSchemas:
        """Every ``*.yaml`` CRD under ``path`` (recursively); ``named`` says where the path
        came from, for the error (an option, or ``GANGWAY_CRDS_DIR``)."""
        if not path.is_dir():
            raise NotFoundError(f"{named}{path}: no such directory of CRD YAML files")
        files = sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")])
        cache = _cache_file(files)
        if cache in _LOADED:
            return _LOADED[cache]
        loaded = _read_cache(cache, str(path))
        if loaded is None:
            loaded = cls.from_documents(_documents(path, files, named), str(path))
            loaded.cache = cache
            loaded._save()
        _LOADED[cache] = loaded
        return loaded

    def _save(self) -> None:
        """Keep these schemas, and which passed the check, in the cache (if it can be written)."""
        if self.cache is None:
            return
        doc = {
            "schemas": [[*k, v] for k, v in self.schemas.items()],
            "checked": sorted([*k] for k in self.checked),
        }
        with contextlib.suppress(OSError, GangwayError):
            write_atomic(self.cache, json.dumps(doc).encode())

    @classmethod
    def from_env(cls) -> CrdSchemas | None:
        """The CRDs in ``GANGWAY_CRDS_DIR``, or None when it is not set."""
        where = os.environ.get("GANGWAY_CRDS_DIR")
        return cls.from_dir(Path(where), named="GANGWAY_CRDS_DIR=") if where else None

    @classmethod
    def from_cluster(cls, context: str | None) -> CrdSchemas:
        """The CRDs installed in the cluster of kube ``context`` (apiextensions API)."""
        from kubernetes import client

        from gangway.cluster.kubeapi import api_client

        api = api_client(context)
        items = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        docs = [api.sanitize_for_serialization(i) for i in items]
        for d in docs:
            d.setdefault("kind", "CustomResourceDefinition")
        return cls.from_documents(docs, f"context {context or '(current)'}")


_LOADED: dict[Path, CrdSchemas] = {}
"""Directories' schemas already read in this process, by cache file (their files' identity)."""


def _cache_dir() -> Path:
    if os.environ.get("GANGWAY_CACHE_DIR"):
        return Path(os.environ["GANGWAY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gangway"


def _cache_file(files: Sequence[Path]) -> Path:
    """The cache file of a directory holding ``files``: named by their paths, sizes and times."""
    ident: list[object] = [_TRANSLATION]
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            ident.append([str(f.resolve()), st.st_size, st.st_mtime_ns])
    key = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]
    return _cache_dir() / "crds" / f"{key}.json"


def _read_cache(cache: Path, source: str) -> CrdSchemas | None:
    """The schemas cached in ``cache``; None when there are none (or they cannot be read)."""
    try:
        doc = json.loads(cache.read_bytes())
        schemas = {(str(a), str(k)): dict(v) for a, k, v in doc["schemas"]}
        checked = {(str(a), str(k)) for a, k in doc["checked"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return CrdSchemas(schemas, source, checked=checked, cache=cache)


def _documents(path: Path, files: Sequence[Path], named: str) -> list[Any]:
    """Every YAML document of ``files``; a file that is not YAML is named."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs: list[Any] = []
    for f in files:
        try:
            with f.open(encoding="utf-8") as fh:
                docs.extend(yaml.load_all(fh, Loader=loader))
        except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise PermanentError(
                f"{named}{path}: {f} is not readable YAML ({why}); remove it or put the "
                "upstream CRD file there"
            ) from None
    return docs
