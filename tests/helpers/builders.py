"""Builders of test objects, in the style of Kueue's ``pkg/util/testing``: a gang and a small
cluster for the scheduling decisions, GPU-cluster traces (the shipped openb one, when at hand,
and small made-up ones) for the simulation, and what Argo shows of a workflow for its links."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gangway.lineage.links import annotate_experiment
from gangway.scheduling.simulation.run import Workload as TraceWorkload
from gangway.scheduling.simulation.trace import TraceNode, TracePod, read_nodes, read_pods
from gangway.scheduling.snapshot.build import ClusterBuilder, SnapshotBuilder
from gangway.scheduling.snapshot.cluster_state import Amount
from gangway.scheduling.workload import Workload


def gang(pods: int, gpus: int = 8, **kw: object) -> Workload:
    """A workload of ``pods`` pods × ``gpus`` H100 for team research (overridable)."""
    base = Workload(
        name="job",
        pods=pods,
        per_pod=Amount(cpu=8, memory="64Gi", gpus=gpus),
        team="research",
        gpu_type="H100" if gpus else None,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def cluster(
    racks: int = 2, per_rack: int = 4, **queue: object
) -> tuple[SnapshotBuilder, ClusterBuilder]:
    b = (
        SnapshotBuilder()
        .priority("high", 1000)
        .priority("low", 10)
        .priority("critical", 100000, preempting=False)
        .team("research", classes=["low", "high"], gpu_types=["H100"])
        .team("evals", classes=["low", "high", "critical"])
    )
    c = b.cluster("c1").racks(racks, per_rack=per_rack)
    c.queue("research", **queue)  # type: ignore[arg-type]
    c.queue("evals")
    return b, c


PUBLISHED = {  # trace → policy → (at 100 %, at 130 %), 10-seed means (seeds 42..51)
    "default": {"random": (86.30, 87.47), "bestfit": (92.86, 93.08), "fgd": (95.23, 95.39)},
    "gpushare100": {"random": (78.90, 79.44), "bestfit": (84.62, 85.01), "fgd": (86.64, 86.90)},
    "cpu250": {"random": (80.00, 80.42), "bestfit": (91.21, 91.45), "fgd": (93.20, 93.41)},
    "multigpu20": {"random": (86.92, 88.69), "bestfit": (93.73, 93.93), "fgd": (95.53, 95.65)},
}


def trace_dir() -> Path:
    where = os.environ.get("GANGWAY_TRACE_DIR")
    if not where:
        pytest.skip("set GANGWAY_TRACE_DIR to the Alibaba openb v2023 trace to calibrate")
    return Path(where)


def trace(name: str) -> TraceWorkload:
    d = trace_dir()
    nodes = read_nodes(d / "openb_node_list_gpu_node.csv")
    return TraceWorkload(tuple(nodes), tuple(read_pods(d / f"openb_pod_list_{name}.csv")))


def small_trace(scale: int = 1, seed: int = 3) -> tuple[list[TraceNode], list[TracePod]]:
    """A made-up cluster of three node kinds (15 × ``scale`` nodes, 72 × ``scale`` GPUs) and a
    mix like the trace's: whole, shared, multi-GPU, CPU-only and model-restricted pods."""
    import random

    rng = random.Random(seed)
    nodes = [trace_node(f"g{i:03d}", 8, "G2", 96000) for i in range(6 * scale)]
    nodes += [trace_node(f"t{i:03d}", 2, "T4", 104000) for i in range(6 * scale)]
    nodes += [trace_node(f"v{i:03d}", 4, "V100", 48000) for i in range(3 * scale)]
    pods = []
    for i in range(120 * scale):
        kind = rng.choice(["whole", "whole", "shared", "shared", "multi", "cpu", "v100"])
        cpu = rng.choice([4000, 8000, 12000])
        if kind == "whole":
            pods.append(trace_pod(f"p{i:04d}", 1, 1000, cpu=cpu))
        elif kind == "shared":
            pods.append(trace_pod(f"p{i:04d}", 1, rng.choice([160, 470, 810]), cpu=cpu))
        elif kind == "multi":
            pods.append(trace_pod(f"p{i:04d}", rng.choice([2, 4, 8]), 1000, cpu=cpu))
        elif kind == "v100":
            pods.append(trace_pod(f"p{i:04d}", 1, 500, cpu=cpu, models="V100"))
        else:
            pods.append(trace_pod(f"p{i:04d}", 0, 0, cpu=cpu * 2))
    return nodes, pods


def argo_process_url(url: str, obj: dict[str, Any]) -> str:
    """What the Argo UI (>= 3.6, ui/src/shared/components/links.tsx) does to a link URL: each
    ``${a.b.c}`` is looked up in the object by dots, except that a key under
    ``workflow.metadata.labels`` / ``.annotations`` is taken whole (it has dots itself)."""

    def one(m: re.Match[str]) -> str:
        parts = m.group(1).split(".")
        if m.group(1).startswith(("workflow.metadata.labels", "workflow.metadata.annotations")):
            parts = [*parts[:3], ".".join(parts[3:])]
        value: Any = obj
        for p in parts:
            value = value.get(p) if isinstance(value, dict) else None
        return str(value) if value else ("" if parts[0] == "workflow" else "null")

    return re.sub(r"\$\{([^}]*)\}", one, url)


def linked_workflow(uid: str, experiment: str) -> dict[str, Any]:
    wf = annotate_experiment(
        {"kind": "Workflow", "metadata": {"name": "wf", "uid": uid}}, experiment
    )
    # The UI passes the workflow as the object, and again under `workflow`.
    return {"metadata": wf["metadata"], "status": {}, "workflow": wf}


def trace_node(name: str, gpus: int, model: str = "T4", cpu: int = 64000) -> TraceNode:
    return TraceNode(name, cpu, 262144, gpus, model)


def trace_pod(name: str, num_gpu: int, milli: int, cpu: int = 1000, models: str = "") -> TracePod:
    spec = frozenset(m for m in models.split("|") if m)
    return TracePod(name, cpu, 1024, num_gpu, milli if num_gpu else 0, spec)


def py(
    code: str,
    *,
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    retry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A container template running ``python -c CODE`` (builder for the tests)."""
    t: dict[str, Any] = {"container": {"image": "x", "command": ["python", "-c", code]}}
    if inputs:
        t["inputs"] = {"parameters": [{"name": n} for n in inputs]}
    if outputs:
        t["outputs"] = {
            "parameters": [{"name": n, "valueFrom": {"path": f"/gangway/out/{n}"}} for n in outputs]
        }
    if retry:
        t["retryStrategy"] = retry
    return t


def workflow(
    templates: dict[str, dict[str, Any]],
    tasks: list[dict[str, Any]],
    params: dict[str, str] | None = None,
) -> dict[str, Any]:
    tmpl = [{"name": n, **t} for n, t in templates.items()]
    tmpl.append({"name": "main", "dag": {"tasks": tasks}})
    wt = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "entrypoint": "main",
            "templates": tmpl,
            "arguments": {
                "parameters": [{"name": k, "value": v} for k, v in (params or {}).items()]
            },
        },
    }
    return wt


WRITE = (
    "import os, sys; os.makedirs('/gangway/out', exist_ok=True); "
    "open('/gangway/out/{name}', 'w').write({value})"
)


def gang_job(
    code: str, *, pods: int, max_retry: int, policies: list[dict[str, Any]]
) -> dict[str, Any]:
    import yaml

    container = {"name": "c", "image": "x", "command": ["python", "-c", code]}
    template = {"spec": {"containers": [container]}}
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"generateName": "g-"},
        "spec": {
            "minAvailable": pods,
            "maxRetry": max_retry,
            "queue": "q",
            "plugins": {"pytorch": ["--port=1"]},
            "policies": policies,
            "tasks": [
                {
                    "name": "master",
                    "replicas": 1,
                    "template": template,
                    "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                },
                {"name": "worker", "replicas": pods - 1, "template": template},
            ],
        },
    }
    return {
        "resource": {
            "action": "create",
            "manifest": yaml.safe_dump(manifest),
            "successCondition": "status.state.phase == Completed",
            "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
        }
    }


GANG_POLICIES: list[dict[str, Any]] = [
    {"exitCode": 1, "action": "AbortJob"},
    {"event": "PodFailed", "action": "RestartJob"},
]
