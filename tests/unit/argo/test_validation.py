"""A malformed workflow is refused as Argo's validation refuses it — every field at its path,
in one line each — by ``gangway run`` before anything runs and by ``gangway lint``; never a
traceback from code that trusted the file's shape, never a run Argo would not start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.argo.validation import (
    CONTAINER_KEYS,
    DAG_TASK_KEYS,
    IO_KEYS,
    PARAMETER_KEYS,
    SPEC_KEYS,
    STEP_KEYS,
    TEMPLATE_KEYS,
    VALUE_FROM_KEYS,
    validation_problems,
)
from gangway.lint import lint_manifest
from gangway.user_yaml import load_yaml
from tests.helpers import cli

HELLO: dict[str, Any] = {
    "name": "hello",
    "container": {"image": "busybox", "command": ["echo", "hi"]},
}


def _workflow(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "bad-"},
        "spec": {"entrypoint": "main", **spec},
    }


def _dag(*tasks: dict[str, Any], **template: Any) -> dict[str, Any]:
    return {"templates": [{"name": "main", "dag": {"tasks": list(tasks)}, **template}, HELLO]}


CASES = {
    "templates-a-mapping": ({"templates": {"name": "main"}}, "spec.templates: must be a list"),
    "a-template-a-name": ({"templates": ["main"]}, "spec.templates[0]: a template must be a"),
    "tasks-a-mapping": (
        {"templates": [{"name": "main", "dag": {"tasks": {"a": "hello"}}}, HELLO]},
        "spec.templates[0].dag.tasks: must be a list, not a mapping",
    ),
    "steps-not-a-list-of-lists": (
        {"templates": [{"name": "main", "steps": [{"name": "a", "template": "hello"}]}, HELLO]},
        "spec.templates[0].steps[0]: must be a list, not a mapping",
    ),
    "workflow-parameters-names": (
        {"arguments": {"parameters": ["x"]}, **_dag({"name": "a", "template": "hello"})},
        "spec.arguments.parameters[0]: must be a mapping, not 'x'",
    ),
    "env-a-mapping": (
        {
            "templates": [
                {**HELLO, "name": "main", "container": {**HELLO["container"], "env": {"A": "b"}}}
            ]
        },
        "spec.templates[0].container.env: must be a list, not a mapping",
    ),
    "with-items-a-number": (
        _dag({"name": "a", "template": "hello", "withItems": 5}),
        "spec.templates[0].dag.tasks[0].withItems: must be a list, not 5",
    ),
    "task-arguments-a-mapping": (
        _dag({"name": "a", "template": "hello", "arguments": {"parameters": {"x": "1"}}}),
        "spec.templates[0].dag.tasks[0].arguments.parameters: must be a list, not a mapping",
    ),
    "template-parallelism-text": (
        _dag({"name": "a", "template": "hello"}, parallelism="x"),
        "spec.templates[0].parallelism: must be a whole number, not 'x'",
    ),
    "workflow-parallelism-negative": (
        {"parallelism": -3, **_dag({"name": "a", "template": "hello"})},
        "spec.parallelism: must be at least 1, not -3",
    ),
    "command-a-string": (
        {"templates": [{"name": "main", "container": {"image": "busybox", "command": "echo"}}]},
        "spec.templates[0].container.command: must be a list, not 'echo'",
    ),
    "misspelt-field": (
        {"templates": [{"name": "main", "contianer": HELLO["container"]}]},
        "spec.templates[0].contianer: unknown field (Argo refuses it); did you mean 'container'?",
    ),
    "retry-limit-text": (
        {"templates": [{**HELLO, "name": "main", "retryStrategy": {"limit": "abc"}}]},
        "spec.templates[0].retryStrategy.limit: 'abc' is not a whole number of retries",
    ),
    "dag-timeout": (
        _dag({"name": "a", "template": "hello"}, timeout="5s"),
        "spec.templates[0].timeout: a dag template does not take a timeout",
    ),
    "misspelt-spec-field": (
        {"paralelism": 2, **_dag({"name": "a", "template": "hello"})},
        "spec.paralelism: unknown field (Argo refuses it); did you mean 'parallelism'?",
    ),
    "misspelt-outputs-field": (
        {"templates": [{**HELLO, "name": "main", "outputs": {"parameter": []}}]},
        "spec.templates[0].outputs.parameter: unknown field (Argo refuses it); did you mean",
    ),
    "misspelt-value-from-field": (
        {
            "templates": [
                {
                    **HELLO,
                    "name": "main",
                    "outputs": {"parameters": [{"name": "o", "valueFrom": {"paht": "/tmp/o"}}]},
                }
            ]
        },
        "spec.templates[0].outputs.parameters[0].valueFrom.paht: unknown field (Argo refuses it)",
    ),
    "timeout-a-bare-number": (
        {"templates": [{**HELLO, "name": "main", "timeout": "10"}]},
        "spec.templates[0].timeout: '10' is a number, not a duration",
    ),
}


@pytest.mark.parametrize(("spec", "said"), CASES.values(), ids=CASES.keys())
def test_a_malformed_workflow_is_refused_by_run_and_lint_with_its_field(
    spec: dict[str, Any], said: str, tmp_path: Path
) -> None:
    f = tmp_path / "wf.yaml"
    f.write_text(yaml.safe_dump(_workflow(spec)))
    run = cli("run", str(f), "--state-dir", str(tmp_path / "st"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert said in run.stderr and str(f) in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "st" / "runs").exists()  # refused before anything was recorded
    lint = cli("lint", str(f), "--no-platform")
    assert lint.returncode == 1 and "Traceback" not in lint.stdout + lint.stderr
    if os.environ.get("GANGWAY_CRDS_DIR"):
        assert f"error: {said.partition(': ')[0]}\n" in lint.stdout, lint.stdout  # the CRD's
    else:  # no CRDs to lint against: lint says so, and what it runs without them is below
        assert "no CRDs to check against" in lint.stderr, lint.stderr
    bare = lint_manifest(_workflow(spec), None, platform=False)  # without the CRDs: Argo's own
    assert [str(f).split(": ", 2)[2] for f in bare] == [said.split(" (")[0]] or any(
        said.split(" (")[0] in str(f) for f in bare
    ), bare


def test_a_retry_limit_from_a_parameter_that_is_no_number_ends_the_step_clearly(
    tmp_path: Path,
) -> None:
    f = tmp_path / "wf.yaml"
    spec = {
        "arguments": {"parameters": [{"name": "n", "value": "2"}]},
        "templates": [
            {**HELLO, "name": "main", "retryStrategy": {"limit": "{{workflow.parameters.n}}"}}
        ],
    }
    f.write_text(yaml.safe_dump(_workflow(spec)))
    res = cli("run", str(f), "--state-dir", str(tmp_path / "st"), "-p", "n=abc")
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert "retryStrategy.limit: 'abc' is not a whole number of retries" in out, out


def test_leaf_templates_and_placeholders_keep_their_timeout() -> None:
    spec = {
        "templates": [
            {**HELLO, "name": "a", "timeout": "30s"},
            {**HELLO, "name": "b", "timeout": "{{inputs.parameters.t}}"},
            {"name": "main", "dag": {"tasks": [{"name": "x", "template": "a"}]}},
        ],
        "templateDefaults": {"timeout": "1m"},  # merged only where it applies
    }
    assert validation_problems(spec) == []


def _crd_spec_schema() -> dict[str, Any]:
    crds = os.environ.get("GANGWAY_CRDS_DIR")
    if not crds:
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs")
    path = Path(crds) / "argo-workflows-v4.1.2" / "argoproj.io_workflows.yaml"
    doc = load_yaml(path.read_text())
    spec: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]
    return spec


def test_the_field_names_are_argos_own() -> None:
    """The known fields are Argo v4.1.2's, read from its Workflow CRD."""
    spec = _crd_spec_schema()["properties"]
    assert set(spec) == SPEC_KEYS
    t = spec["templates"]["items"]["properties"]
    assert set(t) == TEMPLATE_KEYS
    assert set(t["dag"]["properties"]["tasks"]["items"]["properties"]) == DAG_TASK_KEYS
    assert set(t["steps"]["items"]["items"]["properties"]) == STEP_KEYS
    assert set(t["container"]["properties"]) == CONTAINER_KEYS
    assert {k: set(t[k]["properties"]) for k in ("inputs", "outputs")} == {
        k: set(IO_KEYS[k]) for k in ("inputs", "outputs")
    }
    assert set(spec["arguments"]["properties"]) == IO_KEYS["arguments"]
    param = t["outputs"]["properties"]["parameters"]["items"]["properties"]
    assert set(param) == PARAMETER_KEYS
    assert set(param["valueFrom"]["properties"]) == VALUE_FROM_KEYS


def test_a_run_ended_by_the_workflows_own_error_does_not_offer_a_retry(tmp_path: Path) -> None:
    """An unknown variable (here ``{{retries}}`` in a template without a retryStrategy, which
    Argo defines only there) ends the run when its step is about to start: a retry would meet
    it again, so the run says to change the workflow instead."""
    f = tmp_path / "wf.yaml"
    spec = {
        "templates": [
            {
                **HELLO,
                "name": "main",
                "container": {**HELLO["container"], "command": ["echo", "{{retries}}"]},
            }
        ]
    }
    f.write_text(yaml.safe_dump(_workflow(spec)))
    res = cli("run", str(f), "--state-dir", str(tmp_path / "st"))
    assert res.returncode == 1 and "unknown variable {{retries}}" in res.stdout + res.stderr
    assert "gangway retry" not in res.stdout and "the workflow itself must change" in res.stdout
