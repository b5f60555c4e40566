"""``gangway lint`` against the upstream CRD schemas (Argo Workflows v4.1.2, Volcano v1.15.1).

The CRD directory comes from ``GANGWAY_CRDS_DIR`` (``.ci/run`` points it at ``../shared/crds``);
without it these tests skip and say why.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.contract import step_env
from gangway.lint import CrdSchemas, lint_manifest
from gangway.lint._findings import finding
from gangway.workflows.compiler import compile_documents, compile_pipeline
from tests.helpers import REPO, cli

PIPELINES = sorted(p for p in (REPO / "pipelines").glob("*.py") if not p.name.startswith("_"))


@pytest.fixture(scope="session")
def compiled() -> dict[str, Any]:
    return compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_every_pipeline_lints_clean(path: Path, schemas: CrdSchemas) -> None:
    """Every object a pipeline file compiles to: its template and any CronWorkflow."""
    docs = compile_documents(path)
    findings = [f for doc in docs for f in lint_manifest(doc, schemas)]
    assert findings == [], "\n".join(map(str, findings))


T = {
    t["name"]: i
    for i, t in enumerate(
        compile_pipeline(REPO / "pipelines/train_eval_infer.py")["spec"]["templates"]
    )
}
"""The reference pipeline's template indexes, by name (findings name fields by index)."""


def _template(wt: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in wt["spec"]["templates"] if t["name"] == name)


def _dag(wt: dict[str, Any]) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = _template(wt, "main")["dag"]["tasks"]
    return tasks


def _job_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Apply ``edit`` to the Volcano Job inside the train template's manifest."""

    def apply(wt: dict[str, Any]) -> None:
        res = _template(wt, "train")["resource"]
        job = yaml.safe_load(res["manifest"].replace("{{", "<<").replace("}}", ">>"))
        edit(job)
        res["manifest"] = (
            yaml.safe_dump(job)
            .replace("<<", "{{")
            .replace(">>", "}}")
            .replace("'{{inputs.parameters.nodes}}'", "{{inputs.parameters.nodes}}")
            .replace(
                "'{{=asInt(inputs.parameters.nodes) - 1}}'",
                "{{=asInt(inputs.parameters.nodes) - 1}}",
            )
        )

    return apply


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        node = obj
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    return apply


def _as_workflow(wt: dict[str, Any], argument: dict[str, Any]) -> None:
    """``wt`` made a Workflow whose ``argument`` names an undeclared workflow parameter: an
    error there (a WorkflowTemplate gets a warning: the Workflow using it may supply it)."""
    argument["value"] = "{{workflow.parameters.sauce}}"
    wt["kind"] = "Workflow"


def _stage_container(wt: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = _template(wt, "stage")["container"]
    return c


CASES: list[Any] = [
    pytest.param(
        lambda wt: _template(wt, "stage")["retryStrategy"].update(retryPolicy="Sometimes"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].retryStrategy.retryPolicy",
        "not one of",
        id="bad-retry-policy",
    ),
    pytest.param(
        lambda wt: _dag(wt)[2].update(depends="stagee"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['main']}].dag.tasks[2].depends",
        "'stagee', which does not exist",
        id="dangling-dependency",
    ),
    pytest.param(
        lambda wt: _stage_container(wt).update(argz=["x"]),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.argz",
        "unknown field 'argz'",
        id="unknown-field",
    ),
    pytest.param(
        lambda wt: _stage_container(wt)["args"].append("{{inputs.parameters.nope}}"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.args[13]",
        "inputs.parameters.nope}} is not declared",
        id="undeclared-parameter",
    ),
    pytest.param(
        lambda wt: _as_workflow(wt, _dag(wt)[0]["arguments"]["parameters"][0]),
        "Workflow/train-eval-infer",
        f"spec.templates[{T['main']}].dag.tasks[0].arguments.parameters[0].value",
        "workflow.parameters.sauce}} is not a workflow parameter",
        id="undeclared-workflow-parameter",
    ),
    pytest.param(
        lambda wt: _dag(wt)[3]["arguments"]["parameters"][0].update(
            value="{{tasks.train.outputs.parameters.best}}"
        ),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['main']}].dag.tasks[3].arguments.parameters[0].value",
        "task 'train' has no output parameter 'best'",
        id="missing-task-output",
    ),
    pytest.param(
        lambda wt: _dag(wt)[0].update(depends="infer"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['main']}].dag",
        "dependency cycle",
        id="cycle",
    ),
    pytest.param(
        lambda wt: _dag(wt)[0].update(template="no-such-template"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['main']}].dag.tasks[0].template",
        "'no-such-template' does not exist",
        id="unknown-template",
    ),
    pytest.param(
        lambda wt: _template(wt, "stage").update(name="Stage_1"),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].name",
        "'Stage_1' does not match",
        id="bad-name",
    ),
    pytest.param(
        lambda wt: _template(wt, "train")["resource"].update(
            successCondition="status.state.phase ~ Completed"
        ),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['train']}].resource.successCondition",
        "not supported",
        id="unparseable-condition",
    ),
    pytest.param(
        _job_edit(lambda j: j["spec"].pop("minAvailable")),
        "Job in template train",
        "spec.minAvailable",
        "missing",
        id="missing-minAvailable",
    ),
    pytest.param(
        _job_edit(_set(["spec", "tasks", 0, "replicas"], 2)),
        "Job in template train",
        "spec.minAvailable",
        "partial gang",
        id="minAvailable-not-pod-count",
    ),
    pytest.param(
        _job_edit(
            _set(
                [
                    "spec",
                    "tasks",
                    0,
                    "template",
                    "spec",
                    "containers",
                    0,
                    "securityContext",
                    "privileged",
                ],
                True,
            )
        ),
        "Job in template train",
        "spec.tasks[0].template.spec.containers[0].securityContext.privileged",
        "privileged containers are not allowed",
        id="privileged-gang-pod",
    ),
    pytest.param(
        lambda wt: _stage_container(wt)["securityContext"].update(runAsNonRoot=False),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.securityContext.runAsNonRoot",
        "must be true (it says false)",
        id="container-says-run-as-root",
    ),
    pytest.param(
        lambda wt: wt["spec"].setdefault("securityContext", {}).update(runAsNonRoot=False),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.securityContext.runAsNonRoot",
        "the pod's says false",
        id="pod-says-run-as-root",
    ),
    pytest.param(
        lambda wt: _stage_container(wt)["securityContext"].update(allowPrivilegeEscalation=True),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.securityContext.allowPrivilegeEscalation",
        "must be false",
        id="privilege-escalation",
    ),
    pytest.param(
        lambda wt: _stage_container(wt)["env"].append(
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "hunter2"}
        ),
        "WorkflowTemplate/train-eval-infer",
        f"spec.templates[{T['stage']}].container.env[{len(step_env('stage')) + 2}].value",  # +cache
        "use valueFrom.secretKeyRef",
        id="literal-secret",
    ),
    pytest.param(
        _job_edit(
            _set(
                [
                    "spec",
                    "tasks",
                    0,
                    "template",
                    "spec",
                    "containers",
                    0,
                    "resources",
                    "limits",
                    "nvidia.com/gpu",
                ],
                8,
            )
        ),
        "Job in template train",
        "spec.tasks[0].template.spec.nodeSelector",
        "does not select a GPU type",
        id="gpu-without-gpu-type",
    ),
    pytest.param(
        _job_edit(_set(["spec", "queue"], 7)),
        "Job in template train",
        "spec.queue",
        "is not of type",
        id="job-field-type",
    ),
]


@pytest.mark.parametrize(("mutate", "obj", "path", "message"), CASES)
def test_broken_manifests_are_caught_with_their_path(
    compiled: dict[str, Any],
    schemas: CrdSchemas,
    mutate: Callable[[dict[str, Any]], None],
    obj: str,
    path: str,
    message: str,
) -> None:
    wt = copy.deepcopy(compiled)
    mutate(wt)
    findings = lint_manifest(wt, schemas)
    hits = [f for f in findings if f.obj == obj and f.path == path and message in f.message]
    got = "\n".join(map(str, findings))
    assert hits, f"expected a finding at {path}; got:\n{got}"


def test_two_unknown_fields_in_one_object_are_two_findings_each_said_once(
    compiled: dict[str, Any], schemas: CrdSchemas
) -> None:
    """jsonschema names both in one error ("('colour', 'shape' were unexpected)"): lint read
    one garbled field from it, and Argo's own check then named each again."""
    wt = copy.deepcopy(compiled)
    _stage_container(wt).update(colour="red", shape="round")
    wt["spec"]["paralelism"] = 2
    where = f"spec.templates[{T['stage']}].container"
    found = [(f.path, f.message) for f in lint_manifest(wt, schemas, platform=False)]
    unknown = [(p, m) for p, m in found if "unknown field" in m]
    assert sorted(unknown) == [
        ("spec.paralelism", "unknown field 'paralelism'; did you mean 'parallelism'?"),
        (f"{where}.colour", "unknown field 'colour'; remove it or fix the spelling"),
        (f"{where}.shape", "unknown field 'shape'; remove it or fix the spelling"),
    ], found


def test_a_workflow_needs_an_entrypoint_a_library_template_does_not(
    compiled: dict[str, Any],
) -> None:
    """Argo's validation requires spec.entrypoint on a Workflow (and a CronWorkflow's spec), not
    on a WorkflowTemplate whose callers name the templates they run."""
    library = copy.deepcopy(compiled)
    del library["spec"]["entrypoint"]
    assert not [f for f in lint_manifest(library, None) if f.path == "spec.entrypoint"]
    wf = {**library, "kind": "Workflow"}
    said = [str(f) for f in lint_manifest(wf, None) if f.path == "spec.entrypoint"]
    assert said and "missing" in said[0], said


def test_cli_exit_codes_and_output(
    schemas: CrdSchemas, compiled: dict[str, Any], tmp_path: Path
) -> None:
    ok = cli("lint", "pipelines/train_eval_infer.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0 error(s)" in ok.stdout
    broken = copy.deepcopy(compiled)
    _template(broken, "stage")["retryStrategy"]["retryPolicy"] = "Sometimes"
    f = tmp_path / "broken.yaml"
    f.write_text(yaml.safe_dump(broken))
    bad = cli("lint", str(f))
    assert bad.returncode == 1
    assert "retryPolicy" in bad.stdout and "1 error(s)" in bad.stdout


def test_findings_render_with_object_and_path() -> None:
    f = finding("WorkflowTemplate/x", "spec.entrypoint", "template 'm' does not exist")
    assert str(f) == "error: WorkflowTemplate/x: spec.entrypoint: template 'm' does not exist"


def test_team_rules_come_from_the_platform_config(compiled: dict[str, Any]) -> None:
    """A team's workflow runs on its queue; an unknown team is named with the known ones."""
    wrong_queue = copy.deepcopy(compiled)
    wrong_queue["metadata"]["labels"]["gangway.dev/queue"] = "evals"
    found = [str(f) for f in lint_manifest(wrong_queue, None)]
    assert any(
        "metadata.labels.gangway.dev/queue: is 'evals'; team research's queue" in f for f in found
    )
    stranger = copy.deepcopy(compiled)
    stranger["metadata"]["labels"]["gangway.dev/team"] = "reserch"
    found = [str(f) for f in lint_manifest(stranger, None)]
    assert any("team 'reserch' is not in the platform config; teams: research" in f for f in found)
    no_team = copy.deepcopy(compiled)
    del no_team["metadata"]["labels"]["gangway.dev/team"]
    assert lint_manifest(no_team, None) == []  # not a team's workflow: not Gangway's to judge


def test_crd_schemas_are_read_once_and_again_when_a_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CRDs' YAML is read and their schemas checked once, then kept as JSON in the cache
    directory; a changed file is read again, and a cache that cannot be written is passed
    over."""
    from gangway.lint import crds

    crds_dir = os.environ.get("GANGWAY_CRDS_DIR")
    if not crds_dir:
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs")
    src = Path(crds_dir) / "volcano-v1.15.1"
    mine = tmp_path / "crds"
    mine.mkdir()
    for f in src.glob("*.yaml"):
        (mine / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv("GANGWAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(crds, "_LOADED", {})
    key = ("batch.volcano.sh/v1alpha1", "Job")
    first = CrdSchemas.from_dir(mine)
    assert first.validator(*key) is not None and key in first.checked
    (cached,) = (tmp_path / "cache" / "crds").glob("*.json")
    monkeypatch.setattr(crds, "_LOADED", {})  # another process: only the disk cache
    monkeypatch.setattr(crds, "_documents", lambda *a: pytest.fail("read the YAML again"))
    again = CrdSchemas.from_dir(mine)
    assert again.schemas == first.schemas and key in again.checked
    monkeypatch.undo()
    monkeypatch.setenv("GANGWAY_CACHE_DIR", str(tmp_path / "cache"))
    job = next(mine.glob("*job*.yaml"))
    text = job.read_text()
    at = text.index("\n              minAvailable:\n")  # the property of spec, not a description
    job.write_text(text[:at] + text[at:].replace("minAvailable:", "minAvailible:", 1))
    changed = CrdSchemas.from_dir(mine)  # a new identity: the YAML is read again
    spec = changed.schemas[key]["properties"]["spec"]["properties"]
    assert "minAvailible" in spec and len(list(cached.parent.glob("*.json"))) == 2
    (tmp_path / "blocked").write_text("a file where the cache directory would be")
    monkeypatch.setenv("GANGWAY_CACHE_DIR", str(tmp_path / "blocked"))
    job.write_text(job.read_text() + "\n# changed again\n")
    assert CrdSchemas.from_dir(mine).validator(*key) is not None  # unwritable: still works
