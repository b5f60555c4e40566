"""YAML manifests as pipelines: `gangway run`, `lint`, `compile` and `retry` take a file of
Argo objects written by hand (``tests/data/yaml/``) as they take a Hera file — each document
checked, the one object to run chosen, its templateRef and workflowTemplateRef to the file's
WorkflowTemplates resolved as Argo resolves them, every mistake one line."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from gangway.argo.references import merge_spec, references, resolve
from gangway.cli import app
from gangway.errors import GangwayError
from gangway.local.state import find_run, load_nodes
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(120)

DATA = REPO / "tests" / "data" / "yaml"
LIBRARY = DATA / "library.yaml"


CRDS = os.environ.get("GANGWAY_CRDS_DIR")


@pytest.fixture(autouse=True)
def _no_crds_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gangway run` checks -p values against GANGWAY_CRDS_DIR's schemas: every CRD read,
    seconds per run, and not what these tests are about."""
    monkeypatch.delenv("GANGWAY_CRDS_DIR", raising=False)


@pytest.fixture(scope="module")
def argo_crds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with just the Workflow CRD of GANGWAY_CRDS_DIR: quicker to load."""
    if not CRDS:
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs")
    crds = tmp_path_factory.mktemp("crds")
    (crds / "workflows.yaml").symlink_to(next(Path(CRDS).rglob("argoproj.io_workflows.yaml")))
    return crds


def gangway(*args: str) -> Result:
    """The CLI in process, as a user types it."""
    return CliRunner(env={"COLUMNS": "200"}).invoke(app, list(args))


def run_yaml(tmp_path: Path, name: str, *args: str) -> tuple[Result, dict[str, Any]]:
    """`gangway run tests/data/yaml/NAME ARGS`, and the recorded run: its Workflow and its
    nodes' phases and results."""
    state = tmp_path / "state"
    res = gangway("run", str(DATA / name), "--state-dir", str(state), *args)
    saved = find_run(state, None)
    phase, nodes = load_nodes(state, saved.name)
    return res, {
        "workflow": saved.workflow,
        "env": saved.env,
        "phase": phase,
        "nodes": {n.name: (n.phase, n.result) for n in nodes.values()},
    }


def test_a_yaml_workflow_runs_and_its_generate_name_is_argos(tmp_path: Path) -> None:
    res, run = run_yaml(tmp_path, "workflow.yaml")
    assert res.exit_code == 0, res.output
    assert run["nodes"] == {"first": ("Succeeded", "ping"), "second": ("Succeeded", "ping-pong")}
    # generateName + 5 characters of the API server's alphabet (no vowels, no look-alikes)
    assert re.fullmatch(
        r"relay-[bcdfghjklmnpqrstvwxz2456789]{5}", run["workflow"]["metadata"]["name"]
    )
    assert run["env"]["PYTHONPATH"] == str(DATA.resolve())  # the file's own directory


def test_a_yaml_workflow_template_runs_with_values(tmp_path: Path) -> None:
    res, run = run_yaml(tmp_path, "template.yaml", "-p", "upto=4")
    assert res.exit_code == 0, res.output
    assert run["nodes"] == {"count": ("Succeeded", "10")}
    params = run["workflow"]["spec"]["arguments"]["parameters"]
    assert params == [{"name": "upto", "value": "4"}, {"name": "shout", "value": "false"}]


def test_a_lone_cron_workflow_runs_once(tmp_path: Path) -> None:
    res, run = run_yaml(tmp_path, "cron.yaml")
    assert res.exit_code == 0, res.output
    assert run["nodes"] == {"tick": ("Succeeded", "tick")}
    assert run["workflow"]["metadata"]["name"].startswith("nightly-tick-")


def test_template_ref_runs_the_files_template_in_its_own_context(tmp_path: Path) -> None:
    """`templateRef {greetings, both}`: `both` calls `say` — the WorkflowTemplate's `say`,
    as Argo resolves names inside a referenced template."""
    res, run = run_yaml(tmp_path, "library.yaml", "--name", "by-template-ref")
    assert res.exit_code == 0, res.output
    assert run["nodes"] == {
        "greet[0].hello": ("Succeeded", "hello refs"),
        "greet[1].bye": ("Succeeded", "hello refs, bye"),
        "echo": ("Succeeded", "after Succeeded"),
    }
    assert not references(run["workflow"]["spec"])
    assert sorted(t["name"] for t in run["workflow"]["spec"]["templates"]) == [
        "both",
        "main",
        "say",
    ]


def test_workflow_template_ref_merges_the_workflow_over_the_template(tmp_path: Path) -> None:
    """The Workflow's `who` replaces the template's value and keeps its description."""
    res, run = run_yaml(tmp_path, "library.yaml", "--name", "by-workflow-template-ref")
    assert res.exit_code == 0, res.output
    assert run["nodes"] == {
        "[0].hello": ("Succeeded", "hello merged"),
        "[1].bye": ("Succeeded", "hello merged, bye"),
    }
    spec = run["workflow"]["spec"]
    assert spec["entrypoint"] == "both" and "workflowTemplateRef" not in spec
    assert spec["arguments"]["parameters"] == [
        {"name": "who", "value": "merged", "description": "whom to greet"}
    ]


def test_merge_is_argos_strategic_merge() -> None:
    """Keyed lists merge item by item; other lists (resourceClaims) are replaced whole."""
    base = {
        "entrypoint": "a",
        "templates": [{"name": "a", "container": {"image": "x", "args": ["1"]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}],
        "nodeSelector": {"zone": "a"},
    }
    patch = {
        "templates": [{"name": "a", "container": {"args": ["2"]}}, {"name": "b"}],
        "resourceClaims": [{"name": "tpu", "resourceClaimName": "c2"}],
        "nodeSelector": {"disk": "ssd"},
        "onExit": None,
    }
    assert merge_spec(base, patch) == {
        "entrypoint": "a",
        "templates": [{"name": "a", "container": {"image": "x", "args": ["2"]}}, {"name": "b"}],
        "resourceClaims": [{"name": "tpu", "resourceClaimName": "c2"}],
        "nodeSelector": {"zone": "a", "disk": "ssd"},
    }


def test_a_name_taken_gets_a_copy_of_its_own() -> None:
    """The Workflow's own `say` is not the WorkflowTemplate's: the copy is `greetings.say`."""
    lib = yaml.safe_load(LIBRARY.read_text().split("---")[0])
    wf = {
        "kind": "Workflow",
        "spec": {
            "templates": [
                {"name": "say", "suspend": {}},
                {
                    "name": "m",
                    "steps": [
                        [{"name": "s", "templateRef": {"name": "greetings", "template": "say"}}]
                    ],
                },
            ]
        },
    }
    out = resolve(wf, {(False, "greetings"): lib})
    assert [t["name"] for t in out["spec"]["templates"]] == ["say", "m", "greetings.say"]
    assert out["spec"]["templates"][1]["steps"][0][0] == {"name": "s", "template": "greetings.say"}


def test_a_run_from_yaml_is_retried(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    res, run = run_yaml(tmp_path, "retry.yaml", "-p", f"marker={marker}")
    assert res.exit_code == 1, res.output
    assert run["nodes"] == {"[0].first": ("Succeeded", "first"), "[1].check": ("Failed", "")}
    marker.write_text("")
    again = gangway("retry", "--state-dir", str(tmp_path / "state"))
    assert again.exit_code == 0, again.output
    assert "1 step(s) succeeded before" in again.output


def test_argo_41_fields_lint_clean_and_are_ignored_here(argo_crds: Path, tmp_path: Path) -> None:
    """podResources, resourceClaims, executorPlugins: valid against the v4.1.2 CRDs; a local
    step has no pod to size, no device to claim and no plugin to start."""
    res = gangway("lint", str(DATA / "argo-v41.yaml"), "--no-platform", "--crds", str(argo_crds))
    assert res.exit_code == 0, res.output
    assert "1 object(s) checked" in res.output and "0 error(s)" in res.output
    ran, run = run_yaml(tmp_path, "argo-v41.yaml")
    assert ran.exit_code == 0, ran.output
    assert run["nodes"] == {"main": ("Succeeded", "v41")}


def test_compile_prints_the_documents_normalised() -> None:
    res = gangway("compile", str(LIBRARY))
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.output))
    assert docs == list(yaml.safe_load_all(LIBRARY.read_text()))


WORKFLOW = (DATA / "workflow.yaml").read_text()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("kind: Workflow\nspec: [\n", "not valid YAML: ", id="bad-yaml"),
        pytest.param(
            WORKFLOW.replace("  entrypoint: main", "  entrypoint: main\n  entrypoint: x"),
            "not valid YAML: key(s) entrypoint given twice",
            id="key-twice",
        ),
        pytest.param(
            WORKFLOW.replace("kind: Workflow", "kind: Workflw"),
            "document 1: kind 'Workflw': `gangway run` runs a Workflow, WorkflowTemplate or "
            "CronWorkflow",
            id="wrong-kind",
        ),
        pytest.param(
            WORKFLOW.replace("v1alpha1", "v1"),
            "document 1 (Workflow): apiVersion: 'argoproj.io/v1'",
            id="wrong-api-version",
        ),
        pytest.param(
            WORKFLOW.replace("generateName: relay-", "labels: {}"),
            "document 1 (Workflow): metadata.name or generateName: missing",
            id="missing-name",
        ),
        pytest.param(
            "---\n" + WORKFLOW + "---\n" + WORKFLOW,
            "2 objects to run (Workflow/relay-*, Workflow/relay-*)",
            id="two-runnable",
        ),
        pytest.param(
            LIBRARY.read_text().split("---", 1)[1].split("---")[0],
            "templateRef greetings/both: no WorkflowTemplate 'greetings' with a template 'both' "
            "in this file",
            id="ref-not-in-file",
        ),
        pytest.param(
            WORKFLOW.replace("workflow.parameters.word", "workflow.parameters.wrod"),
            "document 1 (Workflow/relay-*): {{workflow.parameters.wrod}} in template main: not "
            "a parameter this workflow declares (it takes: word)",
            id="undeclared-parameter",
        ),
    ],
)
def test_a_bad_manifest_is_one_line_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "pipeline.yaml"
    f.write_text(text)
    res = gangway("run", str(f), "--state-dir", str(tmp_path / "s"))
    err = res.exception
    assert isinstance(err, GangwayError) and err.exit_code == 1, res.output
    assert str(err).startswith(f"{f}: ") and "\n" not in str(err), str(err)
    assert says in str(err), str(err)
    assert not (tmp_path / "s").exists()  # refused before anything was recorded


def test_lint_and_compile_make_the_same_checks(argo_crds: Path, tmp_path: Path) -> None:
    """What a Hera file's compile refuses, a YAML file's lint and compile refuse too; a
    library WorkflowTemplate's parameters are those of the Workflow that calls it (Argo
    validates a WorkflowTemplate's `workflow.parameters` only where it is used)."""
    f = tmp_path / "pipeline.yaml"
    f.write_text(WORKFLOW.replace("workflow.parameters.word", "workflow.parameters.wrod"))
    for command in (["compile"], ["lint", "--crds", str(argo_crds)]):
        err = gangway(*command, str(f)).exception
        assert isinstance(err, GangwayError) and "{{workflow.parameters.wrod}}" in str(err)
    declared = LIBRARY.read_text().split("description: whom to greet\n")
    library = declared[0].rsplit("  arguments:", 1)[0] + declared[1]  # `who` is the callers'
    f.write_text(library)
    assert gangway("compile", str(f)).exit_code == 0
    f.write_text(library.replace("{name: who, value: refs}", "{name: whom, value: refs}"))
    err = gangway("compile", str(f)).exception
    assert isinstance(err, GangwayError), err
    assert str(err).startswith(f"{f}: document 2 (Workflow/by-template-ref): "), str(err)
    assert "{{workflow.parameters.who}} in template greetings.both" not in str(err)


def test_two_objects_to_run_say_how_to_choose() -> None:
    res = gangway("run", str(LIBRARY))
    assert isinstance(res.exception, GangwayError)
    assert str(res.exception).endswith("choose it with --name NAME (e.g. --name by-template-ref)")
    wrong = gangway("run", str(LIBRARY), "--name", "nope")
    assert isinstance(wrong.exception, GangwayError)
    assert "(it has: WorkflowTemplate/greetings, Workflow/by-template-ref" in str(wrong.exception)


def test_a_lone_template_may_name_parameters_its_callers_supply(tmp_path: Path) -> None:
    """Argo validates a WorkflowTemplate's undeclared `workflow.parameters.X` as something
    the submitting Workflow may supply: compile accepts it (lint warns); a local run, which
    cannot supply it, refuses it before anything runs."""
    f = tmp_path / "template.yaml"
    f.write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: wtp}\n"
        "spec:\n  entrypoint: main\n  templates:\n  - {name: main, container: {image: alpine,"
        ' command: [echo, "{{workflow.parameters.msg}}"]}}\n'
    )
    assert gangway("compile", str(f)).exit_code == 0
    err = gangway("run", str(f), "--state-dir", str(tmp_path / "s")).exception
    assert isinstance(err, GangwayError) and "{{workflow.parameters.msg}}" in str(err)


RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _restricted(path: Path, tmp_path: Path) -> Path:
    """A copy of ``path`` whose containers run as Pod Security "restricted" asks (submit lints
    with the platform's rules)."""
    docs = list(yaml.safe_load_all(path.read_text()))
    for doc in docs:
        spec = doc["spec"].get("workflowSpec", doc["spec"])
        for t in spec.get("templates") or []:
            if "container" in t:
                t["container"]["securityContext"] = RESTRICTED
    out = tmp_path / f"restricted-{path.name}"
    out.write_text(yaml.safe_dump_all(docs))
    return out


def test_submit_asks_which_object_when_a_file_holds_several() -> None:
    """A file whose Workflows call a library template: submit must not send the library in
    their place (the adversarial pass saw the user's Workflow dropped), nor guess."""
    res = gangway("submit", "--dry-run", str(LIBRARY))
    err = res.exception
    assert isinstance(err, GangwayError) and err.exit_code == 1, res.output
    assert (
        "2 objects to run (Workflow/by-template-ref, Workflow/by-workflow-template-ref-*)"
        in str(err)
    )
    assert "--name" in str(err)


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        pytest.param("by-template-ref", "templateRef", id="a-workflow-calling-a-template"),
        pytest.param("by-workflow-template-ref", "workflowTemplateRef", id="a-whole-spec-ref"),
    ],
)
def test_submit_sends_a_workflow_as_argo_submit_does_with_the_templates_it_calls(
    name: str, ref: str, tmp_path: Path
) -> None:
    """A Workflow is sent as it is (with the -p values), after the file's WorkflowTemplates it
    references are created or updated, as a cluster must hold them."""
    f = _restricted(LIBRARY, tmp_path)
    res = gangway("submit", "--dry-run", str(f), "--name", name, "-p", "who=you")
    assert res.exit_code == 0, res.output
    sent = list(yaml.safe_load_all(res.stdout))
    assert [o["kind"] for o in sent] == ["WorkflowTemplate", "Workflow"]
    assert sent[0]["metadata"]["name"] == "greetings"
    run = sent[1]
    assert ref in yaml.safe_dump(run["spec"])
    assert {"name": "who", "value": "you"} in run["spec"]["arguments"]["parameters"]
    assert run["metadata"]["namespace"] == sent[0]["metadata"]["namespace"]


def test_submit_of_a_cron_workflow_starts_one_run_of_its_workflow(tmp_path: Path) -> None:
    """As `argo submit --from cronwf/NAME`: a Workflow of the CronWorkflow's workflowSpec,
    labelled with it (the CronWorkflow itself is `gangway deploy`'s)."""
    f = tmp_path / "cron.yaml"
    f.write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: nightly}\n"
        "spec:\n  schedules: ['0 2 * * *']\n  workflowSpec:\n    entrypoint: main\n"
        "    arguments: {parameters: [{name: n, value: '1'}]}\n    templates:\n"
        "    - name: main\n"
        "      container: {image: alpine, command: [echo, '{{workflow.parameters.n}}']}\n"
    )
    f = _restricted(f, tmp_path)
    res = gangway("submit", "--dry-run", str(f), "-p", "n=2")
    assert res.exit_code == 0, res.output
    (run,) = list(yaml.safe_load_all(res.stdout))
    assert run["kind"] == "Workflow" and run["metadata"]["generateName"] == "nightly-"
    assert run["metadata"]["labels"]["workflows.argoproj.io/cron-workflow"] == "nightly"
    assert run["spec"]["arguments"]["parameters"] == [{"name": "n", "value": "2"}]
    assert "schedules" not in run["spec"]
    bad = gangway("submit", "--dry-run", str(f), "-p", "m=2")
    assert isinstance(bad.exception, GangwayError) and "m" in str(bad.exception)
