"""What a compiled step exposes to Prometheus: every step pod's ``metrics`` port and the labels
the PodMonitor copies, GPU pods' model, and Argo's custom metrics on every step template —
named as Argo v4.1 takes them, one type and help text per name, valid against Argo's CRD."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.contract import (
    ENV_GPU_MODEL,
    METRICS_PORT,
    METRICS_PORT_NAME,
    PIPELINE_LABEL,
    QUEUE_LABEL,
    STEP_LABEL,
    TEAM_LABEL,
    WORKFLOW_LABEL,
)
from gangway.lint import CrdSchemas
from gangway.lint.structural import validate_structure
from gangway.workflows.compiler import compile_pipeline
from gangway.workflows.metrics import TEMPLATE_METRICS, template_metrics
from tests.helpers import REPO

PIPELINES = sorted(p for p in (REPO / "pipelines").glob("*.py") if not p.name.startswith("_"))
ARGO_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
"""Argo's rule for a custom metric's name and label keys (the CRD's pattern; Prometheus's legacy
names without ``:``, which Argo refuses since 3.6)."""


def _templates(path: Path) -> list[dict[str, Any]]:
    return list(compile_pipeline(path)["spec"]["templates"])


def _steps(path: Path) -> list[dict[str, Any]]:
    """The templates that run something (a container, or a resource that makes pods)."""
    return [t for t in _templates(path) if "container" in t or "resource" in t]


def _gang_pods(template: dict[str, Any]) -> list[dict[str, Any]]:
    manifest = template["resource"]["manifest"].replace("{{", "").replace("}}", "")
    return [t["template"] for t in yaml.safe_load(manifest)["spec"]["tasks"]]


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_every_step_pod_serves_metrics_on_the_named_port(path: Path) -> None:
    for t in _steps(path):
        containers = (
            [c for pod in _gang_pods(t) for c in pod["spec"]["containers"]]
            if "resource" in t
            else [t["container"]]
        )
        for c in containers:
            ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
            assert ports.get(METRICS_PORT_NAME) == METRICS_PORT, t["name"]
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["GANGWAY_METRICS_PORT"] == str(METRICS_PORT), t["name"]


def test_gang_pods_carry_what_the_pod_monitor_copies() -> None:
    """Argo labels its own pods from the workflow's pod metadata; Volcano's pods get theirs
    from the Job's pod template, which copies the workflow's labels."""
    train = next(t for t in _steps(REPO / "pipelines" / "train_eval_infer.py") if "resource" in t)
    for pod in _gang_pods(train):
        labels = pod["metadata"]["labels"]
        assert labels[STEP_LABEL] == train["name"]
        assert labels[WORKFLOW_LABEL] == "workflow.name"
        for key in (TEAM_LABEL, QUEUE_LABEL, PIPELINE_LABEL):
            assert labels[key] == f"workflow.labels.{key}"


def test_container_steps_pods_carry_their_step_and_the_workflows_labels() -> None:
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    pod_labels = wt["spec"]["podMetadata"]["labels"]
    assert {TEAM_LABEL, QUEUE_LABEL, PIPELINE_LABEL} <= set(pod_labels)
    for t in _steps(REPO / "pipelines" / "train_eval_infer.py"):
        if "container" in t:
            assert t["metadata"]["labels"][STEP_LABEL] == t["name"]


def test_gpu_pods_name_their_gpu_model() -> None:
    gpu = REPO / "pipelines" / "train_eval_infer_gpu.py"
    for t in _steps(gpu):
        containers = (
            [c for pod in _gang_pods(t) for c in pod["spec"]["containers"]]
            if "resource" in t
            else [t["container"]]
        )
        for c in containers:
            env = {e["name"]: e.get("value") for e in c["env"]}
            product = (t.get("nodeSelector") or {}).get("nvidia.com/gpu.product")
            if "resource" in t:
                product = "inputs.parameters.gpu-product"
            assert (ENV_GPU_MODEL in env) == (product is not None), t["name"]
            if product is not None:
                assert env[ENV_GPU_MODEL] == product


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_every_step_template_carries_the_argo_metrics(path: Path) -> None:
    for t in _steps(path):
        metrics = t["metrics"]["prometheus"]
        assert [x["name"] for x in metrics] == [m.name for m in TEMPLATE_METRICS], t["name"]
        for x in metrics:
            labels = {lab["key"]: lab["value"] for lab in x["labels"]}
            assert labels["step"] == t["name"]
            assert labels["team"] == "{{workflow.labels." + TEAM_LABEL + "}}"


def test_metric_names_and_labels_are_ones_argo_takes() -> None:
    """Argo refuses a name or label key outside ``[a-zA-Z0-9_]``, and keeps a name's type,
    help and buckets for every workflow: one declaration each, ``gangway_`` first, a counter's
    ``_total`` written out (Argo's Prometheus exporter adds no suffix)."""
    assert len({m.name for m in TEMPLATE_METRICS}) == len(TEMPLATE_METRICS)
    for m in TEMPLATE_METRICS:
        assert ARGO_NAME.match(m.name) and m.name.startswith("gangway_step_")
        assert all(ARGO_NAME.match(k) for k in m.labels)
        assert m.name.endswith("_total") == (m.kind == "counter")
        assert m.meaning
    durations = next(m for m in TEMPLATE_METRICS if m.kind == "histogram")
    assert durations.value == "{{duration}}" and durations.name.endswith("_seconds")
    results = next(m for m in TEMPLATE_METRICS if m.kind == "counter")
    assert results.value == "1" and "status" in results.labels
    retries = next(m for m in TEMPLATE_METRICS if m.kind == "gauge")
    assert retries.value == "{{retries}}"


def test_two_steps_metrics_differ_only_in_the_step_label() -> None:
    a, b = (template_metrics(s).model_dump(by_alias=True) for s in ("stage", "train"))
    for x, y in zip(a["prometheus"], b["prometheus"], strict=True):
        assert {k: v for k, v in x.items() if k != "labels"} == {
            k: v for k, v in y.items() if k != "labels"
        }
        diff = [(p, q) for p, q in zip(x["labels"], y["labels"], strict=True) if p != q]
        assert diff == [({"key": "step", "value": "stage"}, {"key": "step", "value": "train"})]


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_the_templates_validate_against_argos_crd(path: Path, schemas: CrdSchemas) -> None:
    wt = compile_pipeline(path)
    assert not validate_structure(wt, schemas, path.name)


def test_the_crd_refuses_what_argo_would(schemas: CrdSchemas) -> None:
    """The check above has teeth: a name with ``:`` and a gauge without ``realtime``."""
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    metrics = next(t for t in wt["spec"]["templates"] if "metrics" in t)["metrics"]["prometheus"]
    metrics[0]["name"] = "gangway:step"
    del next(x for x in metrics if "gauge" in x)["gauge"]["realtime"]
    found = [str(f) for f in validate_structure(wt, schemas, "wt")]
    assert len(found) == 2 and "does not match" in found[0] and "realtime" in found[1]
