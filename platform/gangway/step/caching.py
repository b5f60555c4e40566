"""Step caching: a cacheable step that ran before on the same inputs and the same data is not
run again; its outputs are used — after checking they are still there, unchanged.

A step declares itself cacheable (``StepSpec(..., cache=Cache("720h"))``) and says which of its
inputs are data it **reads** (every typed URI, and fields marked :class:`Reads`) and which are
only **places** it works in or writes to (fields marked :class:`Place`: not part of what it
computes). Its key is made of the step's template (command and constant arguments), the image,
the code the step runs, the other inputs by value, and each read input by the **content
digest** of the data there (:func:`content_digest`), not its URI — so the same checkpoints
under another run's prefix are the same key, and a dataset republished under the same URI is a
new one.

How it runs, the same on a cluster and in ``gangway run`` (which executes the compiled
manifest):

1. A **cache check** task runs first (:mod:`gangway.step.cache_key`, template ``STEP-cache``,
   with the step's own arguments). It computes the key and looks for the step's **record**
   under ``STORAGE_ROOT/cache/STEP/KEY.json``: what the step gave when it last ran on that key
   and the digest of every storage URI among its outputs. When the record is young enough
   (``maxAge``) and every output still holds its recorded digest, the check outputs the
   record's memoize key; otherwise (no record, data deleted or changed, too old, storage
   unreachable) a **fresh** key, which no cache holds, and says why.
2. The step's template has Argo's ``memoize`` on that key (ConfigMap ``gangway-step-cache``,
   ``maxAge``): a verified key is a hit and the step does not run; a fresh key is a miss, the
   step runs and, as it writes its outputs (:meth:`~gangway.step.interface.StepSpec.
   write_outputs`), writes its record under the memoize key it was given.

So a hit never returns outputs whose data is gone or changed: Argo's memoize cannot check
that itself, and the check task does it before Argo looks. ``gangway run`` keeps its memoize
cache in the state directory (``cache/``) and marks hits ``cached``; ``--no-cache`` skips it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.errors import PermanentError

__all__ = [
    "CACHE_CONFIGMAP",
    "ENV_CACHE_KEY",
    "ENV_CACHE_RECORD",
    "Cache",
    "CacheRecord",
    "Place",
    "Reads",
    "cache_key",
    "check_record",
    "code_digest",
    "content_digest",
    "fingerprint",
    "keyed_flags",
    "keyed_values",
    "read_digest",
    "record_outputs",
    "storage_uris",
    "write_record",
]

CACHE_CONFIGMAP = "gangway-step-cache"
"""The ConfigMap (in the workflow's namespace) Argo keeps memoized step outputs in."""
ENV_CACHE_KEY = "GANGWAY_CACHE_KEY"
"""A cacheable step's memoize key, from its cache check: the record is written under it."""
ENV_CACHE_RECORD = "GANGWAY_CACHE_RECORD"
"""Where a cacheable step writes its record (a storage URI; empty: write none)."""
_VERSION = "2"
"""Bumped when the key's make-up changes: every older entry then misses."""


@dataclass(frozen=True)
class Reads:
    """Field metadata: the step reads the data at this input's URI (``Annotated[str,
    Reads()]``); typed URIs are read inputs without it. Keyed by content."""


@dataclass(frozen=True)
class Place:
    """Field metadata: left out of the step's cache key — scratch space (a work directory, a
    local cache), or a destination whose name follows from the content (a content-addressed
    publish root). Not a destination chosen per run: a cache hit does not write it."""


@dataclass(frozen=True)
class Cache:
    """A step is cacheable: entries older than ``max_age`` (a Go duration as Argo's
    ``memoize.maxAge`` takes it: ``"720h"``, ``"90m"``) are not used."""

    max_age: str = "720h"

    def __post_init__(self) -> None:
        if self.seconds <= 0:
            raise PermanentError(
                f"Cache(max_age={self.max_age!r}): give a positive Go duration such as '720h' "
                "or '90m' (Argo's memoize.maxAge has no 'd')"
            )

    @property
    def seconds(self) -> float:
        return max_age_seconds(self.max_age)


def max_age_seconds(text: str) -> float:
    """A Go duration (``1h30m``, ``720h``, ``45s``) in seconds; 0 for what is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text)
    if not text or "".join(n + u for n, u in parts) != text:
        return 0.0
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def keyed_flags(args: Sequence[str], roles: Mapping[str, str]) -> list[str]:
    """The flags of a template's ``args`` whose values make its key beyond its fingerprint:
    every read flag (its data is keyed by content, even at a constant URI) and every other
    flag, not a place, whose value varies (has a ``{{…}}``). Constant values are in the
    fingerprint already — and a local run maps ``/gangway/`` paths to per-run directories."""
    flags = {
        a
        for a, value in itertools.pairwise(args)
        if a.startswith("--") and roles.get(a) != "place" and "{{" in value
    }
    return sorted(flags | {f for f, r in roles.items() if r == "read"})


def keyed_values(args: Sequence[str], flags: Collection[str]) -> list[str]:
    """Each of ``flags`` in ``args`` with its value (``[flag, value, …]``, in order)."""
    return [x for a, v in itertools.pairwise(args) if a in flags for x in (a, v)]


def cache_key(fp: str, image: str, keyed: list[str], code: str = "") -> str:
    """A step's key (hex): its template's fingerprint, the image, the keyed flags and their
    values as resolved for this task (:func:`keyed_values`; each read input's content digest
    put in place of its URI by the caller) and ``code``, the digest of the code the step runs
    (:func:`code_digest`)."""
    material = json.dumps([_VERSION, fp, image, keyed, code])
    return hashlib.sha256(material.encode()).hexdigest()


def fingerprint(command: list[str], args: list[str], roles: Mapping[str, str]) -> str:
    """What a template computes, as far as its text says: its command and arguments (inputs
    still as placeholders), less the value of each place flag (``roles``), hashed."""
    text = [v for i, v in enumerate(args) if not (i and roles.get(args[i - 1]) == "place")]
    return hashlib.sha256(json.dumps([command, text]).encode()).hexdigest()[:16]


@functools.cache
def code_digest(module: str) -> str:
    """The digest of the Python source a step runs: its module's top-level package and
    Gangway's own, as installed where the cache check runs (the image, on a cluster), so that
    editing either is a new key."""
    import importlib.util

    h = hashlib.sha256()
    for name in sorted({module.split(".")[0], "gangway"}):
        spec = importlib.util.find_spec(name)
        roots = list(spec.submodule_search_locations or []) if spec else []
        if spec and spec.origin and not roots:
            roots = [str(Path(spec.origin).parent)] if spec.origin.endswith(".py") else []
        for root in roots:
            for path in sorted(Path(root).rglob("*.py")):
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def read_digest(value: str) -> str:
    """A read input's value with every storage URI (or an absolute path) in it replaced by
    the digest of the data there (``absent`` when nothing is) — not the URI itself: the same
    data under another run's prefix is the same input."""

    def digest(uri: str) -> str:
        return content_digest(uri) or "absent"

    if value.startswith("/"):
        return digest(Path(value).as_uri())
    return _map_uris(value, digest)


# ---- content digests ---------------------------------------------------------------------

_SCHEMES = ("file://", "s3://")


def _map_uris(value: str, fn: Callable[[str], str]) -> str:
    """``value`` with ``fn`` applied to the storage URI it is, or to each storage URI among
    the strings of the JSON list/object it is (a fanned-out list of shards); other values
    unchanged."""
    if value.startswith(_SCHEMES):
        return fn(value)
    if not value.startswith(("[", "{")):
        return value
    try:
        doc = json.loads(value)
    except ValueError:
        return value

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return fn(item) if isinstance(item, str) and item.startswith(_SCHEMES) else item

    return json.dumps(walk(doc), sort_keys=True)


def storage_uris(value: str) -> list[str]:
    """The storage URIs in a parameter value (see :func:`_map_uris`)."""
    found: list[str] = []

    def collect(uri: str) -> str:
        found.append(uri)
        return uri

    _map_uris(value, collect)
    return found


def content_digest(uri: str) -> str | None:
    """The digest of the data at ``uri`` — a published directory's manifest digest, else
    every object under it (S3: size and ETag; local files: sha256) — or None when nothing is
    there."""
    from gangway import storage
    from gangway.storage import listing_digest, read_manifest, sha256_file

    manifest = read_manifest(uri)
    if manifest is not None:
        return manifest.digest
    objects = storage.list_objects(uri)
    single = len(objects) == 1 and objects[0].key == ""  # S3 lists an exact key as ""
    if single or (not objects and storage.exists(uri)):  # one object, not a prefix
        return "sha256:" + hashlib.sha256(storage.read_bytes(uri)).hexdigest()
    if not objects:
        return None
    local = storage.parse(uri).path if uri.startswith("file://") else None
    files = {}
    for o in objects:
        if o.etag:
            files[o.key] = f"{o.size}:{o.etag}"
        elif local is not None:  # streamed: a checkpoint's shards need not fit in memory
            files[o.key] = sha256_file(local / o.key)
        else:
            files[o.key] = hashlib.sha256(storage.read_bytes(storage.join(uri, o.key))).hexdigest()
    return listing_digest(files)


# ---- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheRecord:
    """What a cached step gave under a memoize key: its outputs, the digest of each storage
    URI among them, and which workflow made it, when."""

    key: str
    outputs: dict[str, str]
    digests: dict[str, str | None]
    workflow: str
    created: float

    def verify(self) -> str | None:
        """None when every output URI still holds what it held; else why not."""
        for uri, digest in self.digests.items():
            now = content_digest(uri)
            if now != digest:
                return f"{uri} " + ("no longer exists" if now is None else "changed since")
        return None


def check_record(uri: str, max_age: float) -> tuple[CacheRecord | None, str]:
    """The record at ``uri`` if it is young enough and its outputs verify, else why not."""
    from gangway import storage

    if not storage.exists(uri):
        return None, "no entry"
    try:
        raw: dict[str, Any] = json.loads(storage.read_bytes(uri))
        record = CacheRecord(
            key=str(raw["key"]),
            outputs=dict(raw["outputs"]),
            digests=dict(raw["digests"]),
            workflow=str(raw["workflow"]),
            created=float(raw["created"]),
        )
    except (ValueError, KeyError, TypeError):
        return None, f"unreadable entry {uri}"
    if time.time() - record.created > max_age:
        return None, "entry older than maxAge"
    why = record.verify()
    return (None, why) if why else (record, "")


def write_record(uri: str, key: str, outputs: Mapping[str, str], workflow: str) -> None:
    """Record a step's outputs under memoize ``key`` with the digests of the data they name."""
    from gangway import storage

    digests = {u: content_digest(u) for v in outputs.values() for u in storage_uris(v)}
    doc = {
        "key": key,
        "outputs": dict(outputs),
        "digests": digests,
        "workflow": workflow,
        "created": time.time(),
    }
    storage.write_bytes(uri, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def record_outputs(outputs: Mapping[str, str]) -> None:
    """In a cacheable step that was given a record to write (:data:`ENV_CACHE_RECORD`): write
    it. A record that cannot be written costs a rerun next time, never this step."""
    uri, key = os.environ.get(ENV_CACHE_RECORD, ""), os.environ.get(ENV_CACHE_KEY, "")
    if not (uri and key):
        return
    from gangway.contract import WORKFLOW_IDENTITY_ENV

    workflow = os.environ.get(WORKFLOW_IDENTITY_ENV["name"], "")
    try:
        write_record(uri, key, outputs, workflow)
    except Exception as e:  # storage trouble: the step's own outputs are written
        print(f"warning: cache record not written ({type(e).__name__}: {e})", file=sys.stderr)
