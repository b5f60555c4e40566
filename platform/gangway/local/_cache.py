"""Argo's ``memoize`` in a local run: a node of a memoized template whose key has an entry
young enough (``maxAge``) is not run; it gets the outputs saved with the entry.

Entries live in ``state_dir/cache/CONFIGMAP/KEY.json``, as Argo keeps them in the ConfigMap
the template names. As on a cluster, an entry is not checked against the data its outputs
name: a Gangway step's cache check does that before the key is chosen
(:mod:`gangway.step.caching`)."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.argo.substitution import substitute
from gangway.local._results import NodeResult
from gangway.step.caching import max_age_seconds
from gangway.storage import write_atomic

__all__ = ["NodeCache", "NodeKey"]

_CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
"""What Argo's ConfigMap cache accepts as a key."""


@dataclass(frozen=True)
class NodeKey:
    """Where a node's entry lives, and the age (seconds) past which it is not used."""

    path: Path
    max_age: float


@dataclass(frozen=True)
class NodeCache:
    """The run's use of the memoize cache in ``state_dir/cache``; ``enabled=False``
    (``--no-cache``) runs every node and refreshes its entry. Never fails a node: what goes
    wrong with the cache is said in the node's message and costs a rerun at most."""

    state_dir: Path
    run: str
    enabled: bool = True

    def key(
        self, template: Mapping[str, Any], scope: Mapping[str, str], node: NodeResult
    ) -> NodeKey | None:
        """The node's entry; None for a template without ``memoize``, or whose key is not
        one Argo accepts (the node runs, and says so)."""
        memo = template.get("memoize") or {}
        if not memo:
            return None
        key = substitute(str(memo.get("key", "")), scope, where=f"task {node.name} memoize.key")
        if not _CONFIGMAP_KEY.fullmatch(key):
            node.message = f"not memoized: key {key[:80]!r} is not a ConfigMap key"
            return None
        configmap = str(((memo.get("cache") or {}).get("configMap") or {}).get("name", "cache"))
        max_age = max_age_seconds(str(memo.get("maxAge") or "")) or math.inf
        return NodeKey(self.state_dir / "cache" / configmap / f"{key}.json", max_age)

    def hit(self, node: NodeResult, key: NodeKey) -> bool:
        """Give ``node`` the outputs of an entry young enough (True), or say why none was."""
        if not self.enabled:
            node.message = "cache skipped (--no-cache)"
            return False
        if not key.path.is_file():
            return False
        try:
            entry: dict[str, Any] = json.loads(key.path.read_text())
            outputs = {str(k): str(v) for k, v in dict(entry["outputs"]).items()}
            created, run = float(entry["created"]), str(entry.get("run", ""))
        except (OSError, ValueError, KeyError, TypeError) as e:
            node.message = f"memoized entry not used: unreadable ({type(e).__name__})"
            return False
        if time.time() - created > key.max_age:
            node.message = "memoized entry not used: older than maxAge"
            return False
        node.phase, node.cached, node.outputs = "Succeeded", True, outputs
        node.message = f"cached: outputs of {run or 'an earlier run'} (key {key.path.stem[:40]})"
        return True

    def save(self, node: NodeResult, key: NodeKey) -> None:
        doc = {"outputs": dict(node.outputs), "run": self.run, "created": time.time()}
        try:
            write_atomic(key.path, (json.dumps(doc, indent=1) + "\n").encode())
        except OSError as e:  # a cache that cannot be written costs a rerun, no more
            node.message = f"not memoized ({type(e).__name__}: {e}); {node.message}".rstrip("; ")
