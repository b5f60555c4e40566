"""The Argo UI link from a workflow to its MLflow runs: the controller config shipped in
manifests/, how Argo fills it in, and the annotation submit/deploy put on workflows."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from gangway.lineage.links import (
    EXPERIMENT_ANNOTATION,
    annotate_experiment,
    configmap_yaml,
    controller_links,
    workflow_runs_url,
)
from tests.helpers import REPO
from tests.helpers import gangway_without_argo_env as _gangway
from tests.helpers.builders import argo_process_url
from tests.helpers.builders import linked_workflow as _workflow

SHIPPED = REPO / "manifests" / "argo" / "workflow-controller-configmap.yaml"


def test_shipped_controller_config_is_what_gangway_links_renders() -> None:
    assert SHIPPED.read_text() == configmap_yaml("https://mlflow.example.com")
    cm = yaml.safe_load(SHIPPED.read_text())
    assert yaml.safe_load(cm["data"]["links"]) == controller_links("https://mlflow.example.com")
    res = _gangway("links", "--mlflow-url", "https://mlflow.example.com")
    assert res.returncode == 0 and res.stdout == SHIPPED.read_text()


def test_argo_fills_the_link_with_the_workflow_uid_and_experiment() -> None:
    url = controller_links("https://mlflow.lab/")[0]["url"]
    got = argo_process_url(url, _workflow("2f1c-uid", "17"))
    assert got == workflow_runs_url("https://mlflow.lab", "17", "2f1c-uid")
    assert got.startswith("https://mlflow.lab/#/experiments/17/runs?searchFilter=")
    assert unquote(got.split("searchFilter=")[1]) == "tags.`gangway.workflow_uid` = '2f1c-uid'"


def test_the_annotation_lands_where_argo_copies_it_to_workflows() -> None:
    for kind in ("WorkflowTemplate", "CronWorkflow"):
        obj = annotate_experiment({"kind": kind, "spec": {}}, "5")
        assert obj["spec"]["workflowMetadata"]["annotations"] == {EXPERIMENT_ANNOTATION: "5"}
    wf = annotate_experiment({"kind": "Workflow", "metadata": {"annotations": {"a": "b"}}}, "5")
    assert wf["metadata"]["annotations"] == {"a": "b", EXPERIMENT_ANNOTATION: "5"}
    assert annotate_experiment({"kind": "ConfigMap"}, "5") == {"kind": "ConfigMap"}


def test_submit_dry_run_annotates_with_the_pipelines_experiment(mlflow_server: str) -> None:
    from mlflow.tracking import MlflowClient

    from gangway.lineage.ensure import ensure_experiment

    exp = ensure_experiment(MlflowClient(tracking_uri=mlflow_server), "train-eval-infer")
    res = _gangway(
        "submit",
        "pipelines/train_eval_infer.py",
        "--dry-run",
        "--check-links",
        env={"GANGWAY_MLFLOW_URL": mlflow_server},
    )
    assert res.returncode == 0, res.stderr
    wt, wf = [d for d in yaml.safe_load_all(res.stdout) if d]
    assert wt["spec"]["workflowMetadata"]["annotations"][EXPERIMENT_ANNOTATION] == exp
    assert wf["metadata"]["annotations"][EXPERIMENT_ANNOTATION] == exp
    # Not asked, a dry run does not call MLflow, and says what it left out.
    res = _gangway(
        "submit", "pipelines/train_eval_infer.py", "--dry-run",
        env={"GANGWAY_MLFLOW_URL": mlflow_server},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "the MLflow link is left out" in res.stderr and "--check-links" in res.stderr
    assert EXPERIMENT_ANNOTATION not in res.stdout
    res = _gangway("submit", "pipelines/train_eval_infer.py", "--dry-run", "--check-links")
    assert res.returncode == 0 and "set GANGWAY_MLFLOW_URL" in res.stderr
    assert EXPERIMENT_ANNOTATION not in res.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (for its kustomize) absent")
def test_the_component_merges_links_into_an_existing_controller_config(tmp_path: Path) -> None:
    shutil.copytree(REPO / "manifests", tmp_path / "manifests")
    site = tmp_path / "site"
    site.mkdir()
    (site / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: workflow-controller-configmap, "
        "namespace: argo}\ndata: {parallelism: '10'}\n"
    )
    (site / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [cm.yaml]\ncomponents: [../manifests/argo]\n"
    )
    out = subprocess.run(
        ["kubectl", "kustomize", str(site)], capture_output=True, text=True, check=True
    ).stdout
    cm = yaml.safe_load(out)
    assert cm["data"]["parallelism"] == "10"
    assert yaml.safe_load(cm["data"]["links"])[0]["name"] == "MLflow run"


def test_argo_fills_the_dashboard_link_with_the_workflows_name() -> None:
    from gangway.lineage.links import dashboard_link

    url = "https://grafana.lab/d/run?var-workflow=${workflow.metadata.name}"
    links = controller_links("https://mlflow.lab", url)
    assert links[-1] == dashboard_link(url) and links[-1]["scope"] == "workflow"
    assert argo_process_url(links[-1]["url"], _workflow("u1", "3")) == (
        "https://grafana.lab/d/run?var-workflow=wf"
    )
    assert [x["name"] for x in controller_links("https://mlflow.lab")] == [
        "MLflow run",
        "MLflow experiment",
    ]
