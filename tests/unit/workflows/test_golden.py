"""Golden YAML: every pipeline compiles to its committed manifest.

Regenerate after an intended change with ``GANGWAY_UPDATE_GOLDEN=1 pytest
tests/unit/workflows/test_golden.py`` (never in CI) and review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from gangway.workflows.compiler import compile_documents, compile_pipeline, to_yaml
from tests.helpers import REPO

PIPELINES = sorted(p for p in (REPO / "pipelines").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_pipeline_matches_golden(path: Path) -> None:
    golden = path.with_suffix(".yaml")
    text = to_yaml(compile_documents(path))
    if os.environ.get("GANGWAY_UPDATE_GOLDEN") == "1" and not os.environ.get("CI"):
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}; set GANGWAY_UPDATE_GOLDEN=1 once"
    assert text == golden.read_text(), f"{path.name} no longer compiles to {golden.name}"


def test_gang_step_is_a_volcano_job_as_designed() -> None:
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    train = next(t for t in wt["spec"]["templates"] if t["name"] == "train")
    res = train["resource"]
    assert res["action"] == "create" and res["setOwnerReference"] is True
    assert res["successCondition"] == "status.state.phase == Completed"
    assert res["failureCondition"] == "status.state.phase in (Failed,Aborted,Terminated)"
    nodes = 3
    job = yaml.safe_load(
        res["manifest"]
        .replace("{{inputs.parameters.nodes}}", str(nodes))
        .replace("{{=asInt(inputs.parameters.nodes) - 1}}", str(nodes - 1))
    )
    spec = job["spec"]
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1" and job["kind"] == "Job"
    assert job["metadata"]["generateName"] == "{{workflow.name}}-train-"
    # the team's queue (the pipeline's label) and the run's priority class (a parameter)
    assert spec["schedulerName"] == "volcano"
    assert spec["queue"] == "{{workflow.labels.gangway.dev/queue}}"
    assert spec["priorityClassName"] == "{{workflow.parameters.priority-class}}"
    assert spec["minAvailable"] == sum(t["replicas"] for t in spec["tasks"]) == nodes
    assert [t["name"] for t in spec["tasks"]] == ["master", "worker"]
    assert set(spec["plugins"]) == {"pytorch", "svc", "env"}
    assert {(p.get("event"), p.get("exitCode"), p["action"]) for p in spec["policies"]} == {
        (None, 1, "AbortJob"),
        ("PodEvicted", None, "RestartJob"),
        ("PodFailed", None, "RestartJob"),
    }
    pod = spec["tasks"][0]["template"]
    assert pod["metadata"]["labels"]["workflows.argoproj.io/workflow"] == "{{workflow.name}}"
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["python", "-m", "gangway.step.launch"]
    assert "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)" in c["args"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_steps_retry_only_what_may_succeed() -> None:
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    by_name = {t["name"]: t for t in wt["spec"]["templates"]}
    stage = by_name["stage"]["retryStrategy"]
    assert stage["retryPolicy"] == "Always"
    assert "75, 137, 143" in stage["expression"] and "'Error'" in stage["expression"]
    assert stage["affinity"] == {"nodeAntiAffinity": {}}
    assert by_name["train"]["retryStrategy"]["retryPolicy"] == "OnError"
