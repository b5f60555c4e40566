"""Step caching in a local run (:mod:`gangway.caching`): a node's key from its template and
resolved arguments, read inputs replaced by the digest of their data."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway import caching
from gangway.argo.substitution import substitute
from gangway.caching import (
    CACHE_ANNOTATION,
    cache_key,
    code_digest,
    fingerprint,
    max_age_seconds,
    read_digest,
)
from gangway.local._model import NodeResult

__all__ = ["NodeCache", "NodeKey", "node_key"]

NodeKey = tuple[str, float]
"""A node's cache key and the age (seconds) past which an entry is not used."""


class _Undigestable(Exception):
    """The data a node reads could not be digested: it has no key this time."""


def node_key(template: Mapping[str, Any], scope: Mapping[str, str], where: str) -> NodeKey | None:
    """The key of a node of a cacheable template (``memoize``, or Gangway's cache
    annotation), or None for a template that is neither.

    A Gangway step's annotation says which flags read data (keyed by the data's digest) and
    which are places (not keyed); any other memoized template is keyed by all its arguments."""
    memo = template.get("memoize") or {}
    body = template.get("container") or template.get("script")
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    how: dict[str, Any] = json.loads(annotations.get(CACHE_ANNOTATION) or "{}")
    if not (memo or how) or not body:  # a Gangway step reading external data has no memoize
        return None
    command = [str(c) for c in body.get("command") or []]
    raw = [str(a) for a in body.get("args") or []]
    reads, places = set(how.get("reads", [])), set(how.get("places", []))
    args = [substitute(a, scope, where=where) for a in raw]  # an unknown variable: the run's
    try:
        args = [read_digest(v) if i and raw[i - 1] in reads else v for i, v in enumerate(args)]
    except Exception as e:  # storage unreachable, a bad manifest: no key, the step runs
        raise _Undigestable(f"{type(e).__name__}: {e}") from None
    if "source" in body:  # a script's code is part of what it computes
        args.append(substitute(str(body["source"]), scope, where=where))
    fp = str(how.get("fingerprint") or fingerprint(command, raw))
    module = command[2] if command[:2] == ["python", "-m"] and len(command) > 2 else ""
    code = code_digest(module) if module else ""
    key = cache_key(fp, scope.get("workflow.parameters.image", ""), args, places, code)
    max_age = max_age_seconds(str(memo.get("maxAge") or how.get("maxAge", ""))) or math.inf
    return key, max_age


@dataclass(frozen=True)
class NodeCache:
    """The run's use of the cache in ``state_dir/cache``; ``enabled=False`` (``--no-cache``)
    runs every node and refreshes its entry. Never fails a node: what goes wrong with the
    cache is said in the node's message and costs a rerun at most."""

    state_dir: Path
    run: str
    enabled: bool = True

    def key(
        self, template: Mapping[str, Any], scope: Mapping[str, str], node: NodeResult
    ) -> NodeKey | None:
        """The node's key; None without ``memoize``, or when the data it reads cannot be
        digested (the step runs, and says what is wrong with it)."""
        try:
            return node_key(template, scope, f"task {node.name}")
        except _Undigestable as e:
            node.message = f"not cached: the data it reads could not be digested ({e})"
            return None

    def hit(self, node: NodeResult, key: NodeKey) -> bool:
        """Give ``node`` the outputs of a verified entry (True), or say why none was used."""
        if not self.enabled:
            node.message = "cache skipped (--no-cache)"
            return False
        try:
            entry, why = caching.lookup(self.state_dir, node.template, *key)
        except Exception as e:  # storage unreachable, say: run the step, which will tell
            entry, why = None, f"could not be verified ({type(e).__name__}: {e})"
        if entry is None:
            if why != "no entry":  # data deleted or changed, too old: worth saying
                node.message = f"cache entry not used: {why}"
            return False
        node.phase, node.cached, node.outputs = "Succeeded", True, dict(entry.outputs)
        node.message = f"cached: outputs of {entry.run} (key {key[0][:12]})"
        return True

    def save(self, node: NodeResult, key: NodeKey) -> None:
        try:
            caching.save(self.state_dir, node.template, key[0], node.outputs, self.run)
        except Exception as e:  # a cache that cannot be written costs a rerun, no more
            node.message = f"not cached ({type(e).__name__}: {e}); {node.message}".rstrip("; ")
