"""Parameter values are checked as Argo will substitute them: no value can change the structure
of a resource manifest (security), and a value that breaks a rule is refused with its parameter
named — by `gangway run` (before anything runs), `gangway submit` (dry run included), `gangway
lint -p`, and by the executor itself for values only known at run time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gangway.argo.manifests import ManifestInjection, fill_manifest
from gangway.errors import PermanentError
from gangway.lint.values import check_values
from gangway.params import SCHEMA_ANNOTATION
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO, gangway

PIPELINE = "pipelines/train_eval_infer.py"
# Closes the quoted --config value inside the Volcano Job's container args, then adds a
# privileged security context, the host's PID namespace and a shell command to the pod.
PRIVILEGED = (
    "tiny'\n"
    "                  securityContext: {privileged: true}\n"
    "                  command: [sh, -c, 'touch /tmp/gangway-pwned']\n"
    "                hostPID: true\n"
    "                x: '"
)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    """The reference pipeline without its typed parameters' schema: the defence below them
    (filling manifests as Argo will), which untyped pipelines and text parameters rely on."""
    wt = compile_pipeline(REPO / PIPELINE)
    del wt["metadata"]["annotations"][SCHEMA_ANNOTATION]
    return wt


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        pytest.param("model", PRIVILEGED, "would change the manifest's structure", id="privileged"),
        pytest.param("model", "ti'ny", "would change the manifest's structure", id="quote"),
        pytest.param("model", "x\ny", "would change the manifest's structure", id="newline"),
        pytest.param(
            "procs-per-node", "1 #", "would change the manifest's structure", id="comment"
        ),
        pytest.param(
            "procs-per-node", "2: 3", "would change the manifest's structure", id="mapping"
        ),
        pytest.param("nodes", "{a: 1}", "asInt", id="flow-mapping-count"),
        pytest.param("nodes", "0", "a gang needs at least 1 pod", id="zero-pods"),
        pytest.param("nodes", "-1", "fewer than 0 pods", id="negative-pods"),
        pytest.param("procs-per-node", "0", "must be a positive number", id="zero-procs"),
        pytest.param(
            "storage-root", "file:///x'\n  y: 'z", "would change the manifest's", id="storage-root"
        ),
        pytest.param(
            "model", "{{workflow.parameters.source}}", "contains '{{'", id="nested-placeholder"
        ),
        pytest.param("model", '{{=sprig.b64dec("eCc=")}}', "contains '{{'", id="nested-expression"),
        pytest.param("nodes", "2.9", "asInt('2.9'): not an integer", id="fractional-pods"),
        pytest.param("nodes", "\u0662", "not an integer", id="non-ascii-digit"),
        pytest.param("nodes", "1_0", "not an integer", id="underscore-digits"),
        pytest.param(
            "priority-class", "gangway-critical", "not allowed for this team", id="priority-class"
        ),
        pytest.param("image", "docker.io/x/y:1", "not from an allowed registry", id="registry"),
    ],
)
def test_a_bad_value_is_refused_naming_its_parameter(
    template: dict[str, Any], param: str, value: str, message: str
) -> None:
    found = check_values(template, {param: value, "train-steps": "5"}, None)
    assert found, f"-p {param}={value!r} was accepted"
    assert {v.parameters for v in found} == {(param,)}
    assert any(message in v.finding.message for v in found), [str(v) for v in found]
    assert all(str(v).startswith(f"-p {param}: ") for v in found)


def test_negative_gpus_are_refused_naming_the_parameter() -> None:
    wt = compile_pipeline(REPO / "pipelines/train_eval_infer_gpu.py")
    del wt["metadata"]["annotations"][SCHEMA_ANNOTATION]
    found = check_values(wt, {"gpus-per-node": "-1"}, None)
    assert found and {v.parameters for v in found} == {("gpus-per-node",)}
    assert any("cannot be negative" in v.finding.message for v in found), [str(v) for v in found]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"model": "small", "nodes": "3", "procs-per-node": "2"}, id="plain"),
        pytest.param({"model": "a: b"}, id="colon-inside-quotes"),
        pytest.param({"storage-root": "s3://bucket-1/with space"}, id="space"),
        pytest.param({"nodes": "1"}, id="single-pod-gang"),
    ],
)
def test_plain_values_pass(template: dict[str, Any], values: dict[str, str]) -> None:
    assert check_values(template, values, None) == []


def test_fill_manifest_keeps_every_value_where_its_placeholder_was() -> None:
    text = "a: '{{x}}'\nb: {{n}}\nc:\n- --k={{x}}\n"
    assert fill_manifest(text, {"x": "v w", "n": "3"}, where="t") == {
        "a": "v w",
        "b": 3,
        "c": ["--k=v w"],
    }
    with pytest.raises(ManifestInjection) as e:
        fill_manifest(text, {"x": "v'\nd: 'e", "n": "3"}, where="t")
    assert e.value.variables == ["x"]
    with pytest.raises(ManifestInjection, match="n = '\\[1, 2\\]'"):
        fill_manifest(text, {"x": "v", "n": "[1, 2]"}, where="t")


def test_executor_refuses_a_value_known_only_at_run_time(tmp_path: Path) -> None:
    """A task output substituted into a resource manifest is checked the same way."""
    from gangway.local import LocalExecutor, workflow_from_template
    from tests.helpers.builders import WRITE, py, workflow

    evil = "x'\n    privileged: true\n    y: '"
    manifest = (
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        "metadata:\n  name: '{{inputs.parameters.v}}'\n"
    )
    wt = workflow(
        {
            "produce": py(WRITE.format(name="v", value=repr(evil)), outputs=["v"]),
            "job": {
                "inputs": {"parameters": [{"name": "v"}]},
                "resource": {"action": "create", "manifest": manifest},
            },
        },
        [
            {"name": "a", "template": "produce"},
            {
                "name": "b",
                "template": "job",
                "depends": "a",
                "arguments": {
                    "parameters": [{"name": "v", "value": "{{tasks.a.outputs.parameters.v}}"}]
                },
            },
        ],
    )
    res = LocalExecutor(workflow_from_template(wt), tmp_path).run()
    assert res.phase == "Failed"
    assert "inputs.parameters.v" in res.error and "structure" in res.error
    assert not (tmp_path / "runs" / res.name / "logs" / "b").exists(), "the job must not run"


@pytest.mark.e2e
def test_run_refuses_an_injected_privileged_pod_and_runs_nothing(tmp_path: Path) -> None:
    marker = Path("/tmp/gangway-pwned")
    marker.unlink(missing_ok=True)
    state = tmp_path / "state"
    res = gangway("run", PIPELINE, "--state-dir", str(state), "-p", f"model={PRIVILEGED}")
    assert res.returncode == 1
    # The typed parameter refuses it first (tests above: the manifest check behind it).
    assert "-p model: must be one of tiny, small" in res.stderr
    assert "nothing was run" in res.stderr and "Traceback" not in res.stderr
    assert not marker.exists()
    assert not (state / "storage").exists() and not list(state.glob("runs/*/logs"))


def test_submit_dry_run_refuses_the_same_value() -> None:
    res = gangway("submit", PIPELINE, "--dry-run", "-p", f"model={PRIVILEGED}")
    assert res.returncode == 1
    assert "-p model: " in res.stderr and "nothing was run or sent" in res.stderr
    assert "kind: Workflow" not in res.stdout


def test_lint_checks_the_supplied_values() -> None:
    if not os.environ.get("GANGWAY_CRDS_DIR"):
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs")
    res = gangway("lint", PIPELINE, "-p", "nodes=0", "-p", f"model={PRIVILEGED}")
    assert res.returncode == 1, res.stdout
    assert "-p nodes: must be a whole number" in res.stdout  # the typed parameters first
    assert "-p model: must be one of tiny" in res.stdout
    ok = gangway("lint", PIPELINE, "-p", "nodes=3")
    assert ok.returncode == 0, ok.stdout
    typo = gangway("lint", PIPELINE, "-p", "nodez=3")
    assert typo.returncode == 1 and "-p nodez: unknown parameter (did you mean nodes?)" in (
        typo.stdout
    )


def test_a_state_dir_with_a_hash_is_refused_before_anything_runs(tmp_path: Path) -> None:
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path / "run#2"))
    assert res.returncode == 1
    assert "--state-dir" in res.stderr and "'#' is not allowed" in res.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "run#2" / "storage").exists()
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", "storage-root=s3://b/r")
    assert res.returncode == 1
    assert "-p storage-root: " in res.stderr and "not a valid S3 bucket name" in res.stderr
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", "storage-root=/x/r#2")
    assert "-p storage-root: " in res.stderr and "'#' is not allowed" in res.stderr
    assert not list(tmp_path.glob("runs/*/logs"))


def test_values_refusal_lists_every_bad_value_at_once(template: dict[str, Any]) -> None:
    from gangway.lint.values import refuse_bad_values

    with pytest.raises(PermanentError) as e:
        refuse_bad_values(template, {"nodes": "0", "model": "ti'ny"}, None)
    text = str(e.value)
    assert "-p nodes: " in text and "-p model: " in text and "fix these values" in text
