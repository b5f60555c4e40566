"""Read the lineage graph out of MLflow (thin I/O) and resolve what the user asked for.

``gangway lineage`` takes ``model:NAME/VERSION``, ``run:ID``, ``workflow:NAME`` (or its uid)
or ``dataset:DIGEST`` (a prefix is enough); the snapshot is every run, checkpoint and model
version Gangway recorded in the tracking store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from gangway.errors import NotFoundError, PermanentError
from gangway.lineage.graph import (
    CheckpointSnap,
    Graph,
    RunSnap,
    Snapshot,
    VersionSnap,
    with_workflow_edges,
)
from gangway.lineage.records import T, mlflow_digest

__all__ = ["load_snapshot", "pages", "parse_ref", "resolve"]

KINDS = ("model", "run", "workflow", "dataset")


def pages(fetch: Callable[..., Any]) -> Iterator[Any]:
    """Every item of a paged MLflow search (``fetch`` takes ``page_token``)."""
    token: str | None = None
    while True:
        page = fetch(page_token=token)
        yield from page
        token = getattr(page, "token", None)
        if not token:
            return


def load_snapshot(client: Any) -> Snapshot:
    """Everything Gangway recorded in the tracking store behind ``client``."""
    exp_ids = [e.experiment_id for e in pages(client.search_experiments)]
    runs: list[RunSnap] = []
    checkpoints: list[CheckpointSnap] = []
    for i in range(0, len(exp_ids), 100):
        ids = exp_ids[i : i + 100]
        run_page = functools.partial(client.search_runs, ids, max_results=1000)
        model_page = functools.partial(
            client.search_logged_models, experiment_ids=ids, max_results=1000
        )
        for r in pages(run_page):
            if f"{T}.kind" not in r.data.tags:
                continue
            inputs = r.inputs
            runs.append(
                RunSnap(
                    run_id=r.info.run_id,
                    experiment_id=r.info.experiment_id,
                    status=r.info.status,
                    start_ms=int(r.info.start_time or 0),
                    tags=dict(r.data.tags),
                    params=dict(r.data.params),
                    datasets=[
                        (d.dataset.name, d.dataset.digest, d.dataset.source)
                        for d in (inputs.dataset_inputs if inputs else [])
                    ],
                    model_inputs=[m.model_id for m in (inputs.model_inputs if inputs else [])],
                )
            )
        for m in pages(model_page):
            if f"{T}.checkpoint_uri" in (m.tags or {}):
                checkpoints.append(
                    CheckpointSnap(m.model_id, m.experiment_id, dict(m.tags), m.source_run_id)
                )
    versions = [
        VersionSnap(v.name, str(v.version), v.source, v.run_id, dict(v.tags or {}))
        for v in pages(client.search_model_versions)
        if f"{T}.record" in (v.tags or {})
    ]
    return Snapshot(runs, checkpoints, versions)


def parse_ref(ref: str) -> tuple[str, str]:
    """``kind:value`` of a lineage reference, or a clear error saying what to write."""
    kind, _, value = ref.partition(":")
    if kind not in KINDS or not value:
        raise PermanentError(
            f"{ref!r}: say what to look up as model:NAME/VERSION, run:ID, workflow:NAME or "
            "dataset:DIGEST"
        )
    return kind, value


def resolve(g: Graph, ref: str) -> tuple[Graph, str]:
    """The graph to walk and the node ``ref`` names; a clear error when it names nothing."""
    kind, value = parse_ref(ref)
    if kind == "run":
        node = f"run:{value}"
        if node in g.nodes:
            return g, node
        wf = _workflows(g, lambda n: n.get("run_id") == value)
        if wf:
            return with_workflow_edges(g, wf[-1][0]), f"workflow:{wf[-1][0]}"
        raise NotFoundError(f"run:{value}: no Gangway run with this id in the tracking store")
    if kind == "model":
        if "/" not in value:
            raise PermanentError(f"{ref!r}: give the version, e.g. model:{value}/1")
        node = f"model:{value}"
        if node in g.nodes:
            return g, node
        raise NotFoundError(f"{ref}: no model version registered by a Gangway evaluation")
    if kind == "workflow":
        wf = _workflows(g, lambda n: value in (n.get("name"), n["uid"]))
        if not wf:
            raise NotFoundError(f"{ref}: no workflow of that name or uid in the tracking store")
        return with_workflow_edges(g, wf[-1][0]), f"workflow:{wf[-1][0]}"
    want = mlflow_digest(value)
    hits = sorted(
        i
        for i, n in g.nodes.items()
        if n.get("kind") == "dataset" and str(n.get("digest", "")).startswith(want)
    )
    if not hits:
        raise NotFoundError(f"{ref}: no dataset with that digest in the tracking store")
    if len(hits) > 1:
        raise PermanentError(f"{ref}: matches {len(hits)} datasets; give more of the digest")
    return g, hits[0]


def _workflows(g: Graph, match: Callable[[dict[str, Any]], bool]) -> list[tuple[str, int]]:
    """Matching workflow uids, oldest first (the newest run of a name wins)."""
    found = []
    for i, n in g.nodes.items():
        if n.get("kind") == "workflow":
            attrs = {**n, "uid": i.removeprefix("workflow:")}
            if match(attrs):
                found.append((attrs["uid"], int(n.get("start_ms", 0))))
    return sorted(found, key=lambda x: x[1])
