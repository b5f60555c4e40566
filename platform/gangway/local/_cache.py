"""Step caching in a local run (:mod:`gangway.caching`): a node's key from its template and
resolved arguments, read inputs replaced by the digest of their data."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from gangway.argo.substitution import substitute
from gangway.caching import (
    CACHE_ANNOTATION,
    cache_key,
    fingerprint,
    max_age_seconds,
    read_digest,
)

__all__ = ["NodeKey", "node_key"]

NodeKey = tuple[str, float]
"""A node's cache key and the age (seconds) past which an entry is not used."""


def node_key(template: Mapping[str, Any], scope: Mapping[str, str], where: str) -> NodeKey | None:
    """The key of a node of a ``memoize`` template, or None for a template without one.

    A Gangway step's annotation says which flags read data (keyed by the data's digest) and
    which are places (not keyed); any other memoized template is keyed by all its arguments."""
    memo = template.get("memoize")
    body = template.get("container") or template.get("script")
    if not memo or not body:
        return None
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    how: dict[str, Any] = json.loads(annotations.get(CACHE_ANNOTATION) or "{}")
    command = [str(c) for c in body.get("command") or []]
    raw = [str(a) for a in body.get("args") or []]
    reads, places = set(how.get("reads", [])), set(how.get("places", []))
    args: list[str] = []
    for i, a in enumerate(raw):
        value = substitute(a, scope, where=where)
        if i and raw[i - 1] in reads:
            value = read_digest(value)
        args.append(value)
    if "source" in body:  # a script's code is part of what it computes
        args.append(substitute(str(body["source"]), scope, where=where))
    fp = str(how.get("fingerprint") or fingerprint(command, raw))
    key = cache_key(fp, scope.get("workflow.parameters.image", ""), args, places)
    max_age = max_age_seconds(str(memo.get("maxAge", ""))) or math.inf
    return key, max_age
