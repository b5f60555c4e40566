"""The lineage graph as a pure function of a snapshot of MLflow, and walks over it.

Nodes: ``dataset:DIGEST``, ``run:ID`` (a step attempt), ``checkpoint:MODEL_ID`` (an MLflow
logged model of type checkpoint), ``model:NAME/VERSION`` (a registered model version),
``output:URI`` (what a step wrote) and ``workflow:UID`` (a parent run). Edges point
downstream: data → training → checkpoint → model version → inference → outputs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gangway.lineage.records import T, mlflow_digest

__all__ = [
    "CheckpointSnap",
    "Graph",
    "RunSnap",
    "Snapshot",
    "TreeNode",
    "VersionSnap",
    "build_graph",
    "walk",
]


@dataclass(frozen=True)
class RunSnap:
    run_id: str
    experiment_id: str
    status: str
    start_ms: int
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    datasets: list[tuple[str, str, str]] = field(default_factory=list)
    """(name, digest, source) of each dataset input."""
    model_inputs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckpointSnap:
    model_id: str
    experiment_id: str
    tags: dict[str, str]
    source_run_id: str | None = None


@dataclass(frozen=True)
class VersionSnap:
    name: str
    version: str
    source: str
    run_id: str | None
    tags: dict[str, str]


@dataclass(frozen=True)
class Snapshot:
    runs: list[RunSnap]
    checkpoints: list[CheckpointSnap]
    versions: list[VersionSnap]


@dataclass
class Graph:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    down: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    up: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, node_id: str, **attrs: Any) -> str:
        self.nodes.setdefault(node_id, {}).update({k: v for k, v in attrs.items() if v})
        return node_id

    def edge(self, a: str, b: str) -> None:
        if a != b:
            self.down[a].add(b)
            self.up[b].add(a)


def _run_node(g: Graph, r: RunSnap) -> str:
    t = r.tags
    return g.add(
        f"run:{r.run_id}",
        kind="run",
        step=t.get(f"{T}.step", t.get("mlflow.runName", "")),
        node=t.get(f"{T}.node", ""),
        status=r.status,
        workflow=t.get(f"{T}.workflow", ""),
        workflow_uid=t.get(f"{T}.workflow_uid", ""),
        url=t.get(f"{T}.url", ""),
        start_ms=r.start_ms,
        metrics=None,
    )


def build_graph(snap: Snapshot) -> Graph:
    """Every lineage node and edge the snapshot holds."""
    g = Graph()
    by_model: dict[str, str] = {}
    for c in snap.checkpoints:
        node = g.add(
            f"checkpoint:{c.model_id}",
            kind="checkpoint",
            uri=c.tags.get(f"{T}.checkpoint_uri", ""),
            step=int(c.tags.get(f"{T}.checkpoint_step", "0") or 0),
            digest=c.tags.get(f"{T}.checkpoint_digest", ""),
            dataset_digest=c.tags.get(f"{T}.dataset_digest", ""),
        )
        by_model[c.model_id] = node
    runs = {r.run_id: r for r in snap.runs}
    for r in snap.runs:
        kind = r.tags.get(f"{T}.kind")
        if kind == "workflow":
            g.add(
                f"workflow:{r.tags.get(f'{T}.workflow_uid', r.run_id)}",
                kind="workflow",
                name=r.tags.get(f"{T}.workflow", ""),
                run_id=r.run_id,
                status=r.status,
                phase=r.tags.get(f"{T}.phase", ""),
                git_sha=r.tags.get(f"{T}.git_sha", ""),
                cluster=r.tags.get(f"{T}.cluster", ""),
                start_ms=r.start_ms,
            )
            continue
        if kind not in ("step", "eval"):  # an eval: a nightly evaluation of a model version
            continue
        node = _run_node(g, r)
        produced = mlflow_digest(r.tags.get(f"{T}.dataset_out", ""))
        for name, digest, source in r.datasets:
            d = g.add(f"dataset:{digest}", kind="dataset", name=name, digest=digest, source=source)
            g.edge(node, d) if digest == produced else g.edge(d, node)
        via_model = r.tags.get(f"{T}.model_version", "")
        inputs = set(r.model_inputs) | set(json.loads(r.tags.get(f"{T}.checkpoints_in", "[]")))
        for model_id in sorted(inputs):
            if model_id in by_model and not via_model:
                g.edge(by_model[model_id], node)
        if via_model:
            g.edge(g.add(f"model:{via_model}", kind="model"), node)
        for uri in json.loads(r.tags.get(f"{T}.outputs", "[]") or "[]"):
            g.edge(node, g.add(f"output:{uri}", kind="output", uri=uri))
    for c in snap.checkpoints:
        trainer = c.tags.get(f"{T}.training_run") or c.source_run_id
        if trainer and trainer in runs:
            g.edge(f"run:{trainer}", by_model[c.model_id])
    for v in snap.versions:
        node = g.add(
            f"model:{v.name}/{v.version}",
            kind="model",
            name=v.name,
            version=v.version,
            dataset_digest=v.tags.get(f"{T}.dataset_digest", ""),
            checkpoint_uri=v.tags.get(f"{T}.checkpoint", ""),
        )
        model_id = v.source.removeprefix("models:/")
        if model_id in by_model:
            g.edge(by_model[model_id], node)
        if v.run_id and v.run_id in runs:  # the evaluation that chose it: an attribute, not
            # an edge, so trees show the version under the checkpoint it is, not every one read
            g.add(node, registered_by=f"run:{v.run_id}")
    return g


@dataclass
class TreeNode:
    id: str
    children: list[TreeNode] = field(default_factory=list)
    repeated: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.repeated:
            out["repeated"] = True
        if self.children:
            out["children"] = [c.to_json() for c in self.children]
        return out


def _order(g: Graph, ids: set[str]) -> list[str]:
    kinds = {"dataset": 0, "checkpoint": 1, "model": 2, "workflow": 3, "run": 4, "output": 5}

    def key(i: str) -> tuple[int, int, int, str]:
        n = g.nodes.get(i, {})
        return (
            kinds.get(n.get("kind", ""), 9),
            int(n.get("step", 0) if n.get("kind") == "checkpoint" else 0),
            int(n.get("start_ms", 0)),
            i,
        )

    return sorted(ids, key=key)


def walk(g: Graph, root: str, direction: str, *, depth: int = 12) -> TreeNode:
    """The tree of what ``root`` came from (``up``) or what came from it (``down``).

    A node reached again is shown once more as a leaf marked ``repeated``.
    """
    edges = g.up if direction == "up" else g.down
    seen: set[str] = set()

    def visit(node: str, level: int) -> TreeNode:
        if node in seen:
            return TreeNode(node, repeated=True)
        seen.add(node)
        t = TreeNode(node)
        if level < depth:
            t.children = [visit(c, level + 1) for c in _order(g, edges.get(node, set()))]
        return t

    return visit(root, 0)


def workflow_steps(g: Graph, uid: str) -> list[str]:
    """The step runs of workflow ``uid``, in start order."""
    ids = {i for i, n in g.nodes.items() if n.get("kind") == "run" and n.get("workflow_uid") == uid}
    return _order(g, ids)


def with_workflow_edges(g: Graph, uid: str) -> Graph:
    """``g`` plus edges that let a walk start at ``workflow:UID``: down to its entry steps
    (those fed by nothing the workflow made) and up to what it consumed from outside."""
    root = f"workflow:{uid}"
    mine = set(workflow_steps(g, uid))
    made = set(mine)  # everything downstream of the workflow's own steps
    todo = list(mine)
    while todo:
        for n in g.down.get(todo.pop(), set()) - made:
            made.add(n)
            todo.append(n)
    out = Graph(dict(g.nodes), defaultdict(set), defaultdict(set))
    for a, bs in g.down.items():
        for b in bs:
            out.edge(a, b)
    for r in mine:
        feeds = g.up.get(r, set())
        if not feeds & made:
            out.edge(root, r)
        for f in feeds - made:
            out.edge(f, root)
    return out
