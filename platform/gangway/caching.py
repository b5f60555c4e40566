"""Step caching: a cacheable step that ran before on the same inputs and the same data is not
run again; its recorded outputs are used — after checking they are still there, unchanged.

A step declares itself cacheable (``StepSpec(..., cache=Cache("720h"))``) and says which of its
inputs are data it **reads** (every typed URI, and fields marked :class:`Reads`) and which are
only **places** it works in or writes to (fields marked :class:`Place`: not part of what it
computes). Its key is made of the step's template (command and constant arguments), the image,
the other inputs by value, and each read input by the **content digest** of the data there
(:func:`content_digest`), not its URI — so the same checkpoints under another run's prefix are
the same key, and a dataset republished under the same URI is a new one.

Where it applies:

* ``gangway run`` keeps the keys in its state directory (``cache/``) and, on a hit, verifies
  that every output that is a storage URI still holds the data with the digest recorded when
  the entry was made; data deleted or changed means the step runs again (``--no-cache``:
  always). The run's summary marks the step ``cached``.
* On a cluster the template compiles to Argo's ``memoize`` (a ConfigMap cache, ``maxAge``)
  when every read input comes from another task. Argo sees only the input values, not the data
  behind them, so its key hashes the read inputs by URI: exact for content-addressed data (the
  corpus lives under ``corpora/<digest>``), and for per-run locations (a run's checkpoints) a
  hit only within the same workflow (a retry). A step reading external data (a parameter, a
  constant URI) is not memoized: data republished under the same URI would get old outputs.
  Argo does not verify a memoized output still exists.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.errors import PermanentError

__all__ = [
    "CACHE_ANNOTATION",
    "CACHE_CONFIGMAP",
    "Cache",
    "CacheEntry",
    "Place",
    "Reads",
    "cache_key",
    "code_digest",
    "content_digest",
    "fingerprint",
    "keyed_args",
    "lookup",
    "memoize_key",
    "read_digest",
    "save",
    "storage_uris",
    "template_fields",
]

CACHE_CONFIGMAP = "gangway-step-cache"
"""The ConfigMap (in the workflow's namespace) Argo keeps memoized step outputs in."""
CACHE_ANNOTATION = "gangway.dev/cache"
"""On a cacheable template's pod metadata: which inputs are read and which are places (JSON),
so ``gangway run`` keys the compiled template exactly as the step declared it."""
_VERSION = "1"
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


def keyed_args(args: list[str], places: Collection[str]) -> list[str]:
    """The arguments that make a step's key: all but each place flag and its value."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in places:
            skip = True
        else:
            out.append(a)
    return out


_PLACEHOLDER = re.compile(r"\{\{\s*([\w.-]+)\s*\}\}")


def _expr(name: str) -> str:
    """A ``{{…}}`` variable as an Argo expression term (subscripts for hyphenated names)."""
    for prefix in ("workflow.parameters.", "inputs.parameters."):
        if name.startswith(prefix):
            return f"{prefix[:-1]}['{name.removeprefix(prefix)}']"
    if name in ("workflow.uid", "workflow.name", "workflow.namespace"):
        return name
    raise PermanentError(
        f"{{{{{name}}}}}: a cacheable step's arguments may use workflow and input parameters, "
        "workflow.uid, .name and .namespace (its key must be computable before it runs)"
    )


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def memoize_key(template: str, args: list[str], places: Collection[str], fp: str) -> str:
    """Argo's ``memoize.key``: ``TEMPLATE-<sha256>`` over the key's version, the template's
    fingerprint, the image and every non-place argument as Argo resolves it (a ConfigMap key
    allows only ``[-._a-zA-Z0-9]``, hence the hash)."""
    terms = [_quoted(f"{_VERSION}|{fp}|"), "workflow.parameters['image']"]
    for arg in keyed_args(args, places):
        terms.append(_quoted("|"))
        pos = 0
        for m in _PLACEHOLDER.finditer(arg):
            if m.start() > pos:
                terms.append(_quoted(arg[pos : m.start()]))
            terms.append(_expr(m.group(1)))
            pos = m.end()
        if pos < len(arg):
            terms.append(_quoted(arg[pos:]))
    return f"{template}-{{{{=sprig.sha256sum({' + '.join(terms)})}}}}"


def template_fields(
    template: str,
    command: list[str],
    args: list[str],
    cache: Cache,
    roles: Mapping[str, str],
    *,
    argo: bool = True,
) -> dict[str, Any]:
    """A cacheable container template's Hera fields: the annotation (JSON) that tells
    ``gangway run`` how it keys its arguments (``roles``: flag → ``read`` or ``place``) and,
    when ``argo``, Argo's ``memoize``. Pass ``argo=False`` when a read input is external data
    (a workflow parameter or a constant URI): Argo could key it only by its URI, and data
    republished under the same URI would get the old outputs."""
    from hera.workflows import models as m  # only when compiling: steps import this module

    fp = fingerprint(command, args)
    places = sorted(f for f, r in roles.items() if r == "place")
    how = {
        "fingerprint": fp,
        "reads": sorted(f for f, r in roles.items() if r == "read"),
        "places": places,
        "maxAge": cache.max_age,
    }
    fields: dict[str, Any] = {"annotations": {CACHE_ANNOTATION: json.dumps(how, sort_keys=True)}}
    if argo:
        fields["memoize"] = m.Memoize(
            key=memoize_key(template, args, places, fp),
            max_age=cache.max_age,
            cache=m.Cache(config_map=m.LocalObjectReference(name=CACHE_CONFIGMAP)),
        )
    return fields


def cache_key(fp: str, image: str, args: list[str], places: Collection[str], code: str = "") -> str:
    """The local key: as :func:`memoize_key`, over ``args`` as resolved for this node, where
    the caller has put each read input's content digest in place of its URI, and ``code``, the
    digest of the code the step runs here (:func:`code_digest`)."""
    material = json.dumps([_VERSION, fp, image, keyed_args(args, places), code])
    return hashlib.sha256(material.encode()).hexdigest()


def fingerprint(command: list[str], args: list[str]) -> str:
    """What a template computes, as far as its text says: its command and arguments (inputs
    still as placeholders), hashed."""
    return hashlib.sha256(json.dumps([command, args]).encode()).hexdigest()[:16]


@functools.cache
def code_digest(module: str) -> str:
    """The digest of the Python source a step runs here: its module's top-level package and
    Gangway's own, so that editing either is a new key for ``gangway run`` (on a cluster the
    code is the image's: pin images by digest, and a new build is a new key)."""
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


# ---- the local store -----------------------------------------------------------------------


@dataclass(frozen=True)
class CacheEntry:
    """What a cached step gave: its outputs, the digest of each storage URI among them, and
    which run made it, when."""

    outputs: dict[str, str]
    digests: dict[str, str | None]
    run: str
    created: float

    def verify(self) -> str | None:
        """None when every output URI still holds what it held; else why not."""
        for uri, digest in self.digests.items():
            now = content_digest(uri)
            if now != digest:
                return f"{uri} " + ("no longer exists" if now is None else "changed since")
        return None


def _path(state_dir: Path, template: str, key: str) -> Path:
    return state_dir / "cache" / f"{template}-{key}.json"


def lookup(
    state_dir: Path, template: str, key: str, max_age: float
) -> tuple[CacheEntry | None, str]:
    """The entry for ``key`` if it is young enough and its outputs verify, with why not."""
    path = _path(state_dir, template, key)
    if not path.is_file():
        return None, "no entry"
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
        entry = CacheEntry(
            outputs=dict(raw["outputs"]),
            digests=dict(raw["digests"]),
            run=str(raw["run"]),
            created=float(raw["created"]),
        )
    except (ValueError, KeyError, TypeError):
        return None, f"unreadable entry {path}"
    if time.time() - entry.created > max_age:
        return None, "entry older than maxAge"
    why = entry.verify()
    return (None, why) if why else (entry, "")


def save(state_dir: Path, template: str, key: str, outputs: Mapping[str, str], run: str) -> None:
    """Record a step's outputs under ``key`` with the digests of the data they name."""
    from gangway.storage import write_atomic

    digests = {u: content_digest(u) for v in outputs.values() for u in storage_uris(v)}
    doc = {"outputs": dict(outputs), "digests": digests, "run": run, "created": time.time()}
    write_atomic(_path(state_dir, template, key), (json.dumps(doc, indent=1) + "\n").encode())
