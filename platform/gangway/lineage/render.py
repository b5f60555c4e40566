"""Lineage trees as text lines (for a terminal) or JSON (for tools): pure functions."""

from __future__ import annotations

from typing import Any

from gangway.lineage.graph import Graph, TreeNode

__all__ = ["label", "text_lines", "to_json"]


def _short(digest: str, n: int = 19) -> str:
    return digest if len(digest) <= n else digest[:n] + "…"


def label(g: Graph, node_id: str) -> str:
    """One line describing a node."""
    n = g.nodes.get(node_id, {})
    kind = n.get("kind", node_id.split(":", 1)[0])
    if kind == "dataset":
        return f"dataset {n.get('name', '')} {_short(n.get('digest', ''))}  {n.get('source', '')}"
    if kind == "run":
        shard = str(n.get("node", "")).rsplit("/", 1)[-1]
        what = f"{n.get('step', '')} {shard}".strip() if shard else n.get("step", "")
        wf = f"  workflow {n['workflow']}" if n.get("workflow") else ""
        url = f"  {n['url']}" if n.get("url") else ""
        return f"run {what} [{n.get('status', '?')}] {node_id[4:]}{wf}{url}"
    if kind == "checkpoint":
        digest = f" {_short(n['digest'])}" if n.get("digest") else ""
        return f"checkpoint step {n.get('step', '?')}{digest}  {n.get('uri', '')}"
    if kind == "model":
        by = f"  registered by {n['registered_by']}" if n.get("registered_by") else ""
        return f"model version {node_id[6:]}{by}"
    if kind == "output":
        return f"output {n.get('uri', node_id[7:])}"
    if kind == "workflow":
        sha = f"  git {n['git_sha'][:12]}" if n.get("git_sha") else ""
        phase = n.get("phase") or n.get("status", "")
        return f"workflow {n.get('name', '')} [{phase}] uid {node_id[9:]}{sha}"
    return node_id


def _lines(g: Graph, t: TreeNode, prefix: str, last: bool, top: bool) -> list[str]:
    mark = "" if top else ("└── " if last else "├── ")
    text = label(g, t.id) + ("  (shown above)" if t.repeated else "")
    out = [prefix + mark + text]
    inner = prefix + ("" if top else ("    " if last else "│   "))
    for i, c in enumerate(t.children):
        out += _lines(g, c, inner, i == len(t.children) - 1, False)
    return out


def text_lines(g: Graph, root: str, up: TreeNode, down: TreeNode) -> list[str]:
    """The node, then what it came from and what came from it, as indented trees."""
    out = [label(g, root), ""]
    for title, tree in (
        ("upstream (where it came from)", up),
        ("downstream (what came of it)", down),
    ):
        out.append(title)
        if not tree.children:
            out.append("    (nothing recorded)")
        for i, c in enumerate(tree.children):
            out += _lines(g, c, "    ", i == len(tree.children) - 1, False)
        out.append("")
    return out[:-1]


def to_json(g: Graph, root: str, up: TreeNode, down: TreeNode) -> dict[str, Any]:
    """Every node the two trees reach, with its attributes, and the trees by node id."""
    ids: set[str] = set()

    def collect(t: TreeNode) -> None:
        ids.add(t.id)
        for c in t.children:
            collect(c)

    collect(up)
    collect(down)
    return {
        "root": root,
        "nodes": {i: {"label": label(g, i), **g.nodes.get(i, {})} for i in sorted(ids)},
        "upstream": up.to_json(),
        "downstream": down.to_json(),
    }
