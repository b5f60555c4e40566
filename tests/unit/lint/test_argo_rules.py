"""``gangway lint --no-platform`` on valid Argo Workflows that are not Gangway pipelines: no
false positives; and the finding each broken one gets (schemas, ``depends``, core kinds).
CRDs come from ``GANGWAY_CRDS_DIR``; without it the schema tests skip and say why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import hera.workflows as hw
import pytest
import yaml
from hera.workflows import DAG, Container, Parameter, Resource, Step, Steps, Task, Workflow
from hera.workflows import models as m

from gangway.errors import FieldError
from gangway.lint import CrdSchemas, lint_manifest
from gangway.lint.core_kinds import KUBERNETES_VERSION
from gangway.lint.crds import to_json_schema
from tests.helpers import REPO, Ran, cli

IMAGE = "busybox:1.36"


def _errors(obj: dict[str, Any], schemas: CrdSchemas) -> list[FieldError]:
    return [f for f in lint_manifest(obj, schemas, platform=False) if f.severity == "error"]


def _doc(w: Workflow) -> dict[str, Any]:
    doc: dict[str, Any] = w.to_dict()
    return doc


def _echo(name: str = "echo") -> Container:
    msg = Parameter(name="msg")
    return Container(
        name=name, image=IMAGE, command=["echo", "{{inputs.parameters.msg}}"], inputs=[msg]
    )


def _say(name: str, msg: str = "{{item}}", **fields: Any) -> Step:
    """A step of the ``echo`` template saying ``msg``."""
    return Step(name=name, template="echo", arguments={"msg": msg}, **fields)


def steps_with_groups_when_and_loops() -> dict[str, Any]:
    with Workflow(generate_name="coin-", entrypoint="main", parallelism=2) as w:
        _echo()
        flip = hw.Script(
            name="flip", image="python:3.12-slim", command=["python"], source="print(1)"
        )
        result = "{{steps.toss.outputs.result}}"
        with Steps(name="main", retry_strategy=hw.RetryStrategy(limit="2")) as s:
            Step(name="toss", template=flip)
            with s.parallel():
                _say("heads", result, when=f"{result} == 1")
                _say("tails", result, when=f"{result} == 0")
            _say("each", with_items=["a", "b"])
            _say("fan", with_param=result)
            _say("count", with_sequence=m.Sequence(count="5", format="shard-%02d"))
    return _doc(w)


def dag_with_depends_outputs_and_artifacts() -> dict[str, Any]:
    with Workflow(generate_name="relay-", entrypoint="main") as w:
        make = hw.Script(
            name="make",
            image="python:3.12-slim",
            command=["python"],
            source="print(7)",
            outputs=[hw.Artifact(name="blob", path="/tmp/blob", archive=hw.NoneArchiveStrategy())],
            active_deadline_seconds=120,
        )
        take = Container(
            name="take",
            image=IMAGE,
            command=["sh", "-c", "cat {{inputs.artifacts.blob.path}}; echo {{pod.name}}"],
            args=["{{inputs.parameters.n}} try {{retries}}"],
            inputs=[Parameter(name="n"), hw.Artifact(name="blob", path="/tmp/in")],
            retry_strategy=hw.RetryStrategy(limit=2),
        )
        note = Container(
            name="note",
            image=IMAGE,
            command=["cat", "/tmp/note"],
            inputs=[hw.RawArtifact(name="note", path="/tmp/note", data="hello")],
            env=[
                hw.SecretEnv(name="TOKEN", secret_name="api", secret_key="token"),
                hw.Env(name="A", value="1"),
            ],
        )
        with DAG(name="main", retry_strategy=hw.RetryStrategy(limit=1)):
            Task(name="a", template=make)
            Task(
                name="b",
                template=take,
                arguments=[
                    Parameter(name="n", value="{{tasks.a.outputs.result}}"),
                    hw.Artifact(name="blob", from_="{{tasks.a.outputs.artifacts.blob}}"),
                ],
                depends="(a.Succeeded || a.Failed) && !a.Skipped",
            )
            Task(name="c", template=note, depends="b.AnySucceeded || b.AllFailed")
            Task(name="d", template=note, dependencies=["a", "c"])
    return _doc(w)


def nested_dag_and_steps() -> dict[str, Any]:
    with Workflow(generate_name="nest-", entrypoint="outer") as w:
        echo = _echo()
        with Steps(name="pair", inputs=[Parameter(name="msg")]) as pair, pair.parallel():
            Step(name="left", template=echo, arguments={"msg": "{{inputs.parameters.msg}}"})
            Step(name="right", template=echo, arguments={"msg": "right"})
        with DAG(name="inner") as inner:
            Task(name="x", template=pair, arguments={"msg": "x"})
        with DAG(name="outer"):
            Task(name="first", template=inner)
            Task(name="then", template=pair, arguments={"msg": "then"}, depends="first")
    return _doc(w)


def exit_handlers_and_hooks() -> dict[str, Any]:
    with Workflow(generate_name="bye-", entrypoint="main", on_exit="report") as w:
        Container(
            name="report",
            image=IMAGE,
            command=["echo", "{{workflow.status}} {{workflow.failures}} {{workflow.name}}"],
        )
        work = Container(name="work", image=IMAGE, command=["true"])
        running = m.LifecycleHook(template="report", expression='tasks.job.status == "Running"')
        with DAG(name="main"):
            Task(name="job", template=work, on_exit="report", hooks={"running": running})
    return _doc(w)


def suspend_containerset_and_pod_extras() -> dict[str, Any]:
    claim = m.PersistentVolumeClaim(
        metadata=m.ObjectMeta(name="scratch"),
        spec=m.PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=m.VolumeResourceRequirements(requests={"storage": "1Gi"}),
        ),
    )
    with Workflow(generate_name="misc-", entrypoint="main", volume_claim_templates=[claim]) as w:
        hw.Suspend(name="approve")
        hw.Suspend(name="nap", duration="10s")
        with hw.ContainerSet(name="pipeline"):
            prep = hw.ContainerNode(name="prep", image=IMAGE, command=["true"])
            hw.ContainerNode(name="run", image=IMAGE, command=["true"], dependencies=[prep.name])
        Container(
            name="with-helpers",
            image=IMAGE,
            command=["ls", "/scratch"],
            init_containers=[hw.UserContainer(name="fetch", image=IMAGE, command=["true"])],
            sidecars=[hw.UserContainer(name="cache", image="redis:7")],
            volume_mounts=[m.VolumeMount(name="scratch", mount_path="/scratch")],
        )
        Container(name="server", image="redis:7", daemon=True)
        with Steps(name="main"):
            for i, name in enumerate(("server", "approve", "nap", "pipeline", "with-helpers")):
                Step(name=f"s{i}", template=name)
    return _doc(w)


def cron_workflow() -> dict[str, Any]:
    with hw.CronWorkflow(
        name="nightly-report", schedules=["0 2 * * *"], timezone="UTC", entrypoint="main"
    ) as w:
        Container(name="main", image=IMAGE, command=["true"])
    return _doc(w)


MANIFESTS: dict[str, str] = yaml.safe_load(
    (REPO / "tests/data/lint-argo-manifests.yaml").read_text()
)
"""Objects of core Kubernetes kinds a resource template creates, as text (placeholders in)."""
SERVICE, CLAIM, STATEFUL_SET, JOB = (
    MANIFESTS[k] for k in ("service", "claim", "stateful-set", "job")
)


def resources(*manifests: str, condition: str | None = None) -> dict[str, Any]:
    """A steps workflow whose resource templates create ``manifests``, in order."""
    with Workflow(generate_name="res-", entrypoint="main") as w:
        for i, text in enumerate(manifests):
            Resource(
                name=f"make-{i}",
                action="create",
                manifest=text,
                inputs=[Parameter(name="port", default="6379")],
                success_condition=condition,
            )
        with Steps(name="main"):
            for i in range(len(manifests)):
                Step(name=f"r{i}", template=f"make-{i}", arguments={"port": "8080"})
    return _doc(w)


VALID: list[Any] = [
    pytest.param(steps_with_groups_when_and_loops, id="steps-groups-when-loops"),
    pytest.param(dag_with_depends_outputs_and_artifacts, id="dag-depends-outputs-artifacts"),
    pytest.param(nested_dag_and_steps, id="nested-dag-and-steps"),
    pytest.param(exit_handlers_and_hooks, id="exit-handlers-and-hooks"),
    pytest.param(suspend_containerset_and_pod_extras, id="suspend-containerset-pod-extras"),
    pytest.param(cron_workflow, id="cron-workflow"),
    pytest.param(lambda: resources(SERVICE, CLAIM, STATEFUL_SET), id="core-kinds-created"),
    pytest.param(
        lambda: resources(JOB, condition="status.succeeded > 0, status.active notin (1,2)"),
        id="resource-condition-with-comparison",
    ),
]


@pytest.mark.parametrize("build", VALID)
def test_valid_argo_workflows_lint_without_errors(
    build: Callable[[], dict[str, Any]], schemas: CrdSchemas
) -> None:
    found = lint_manifest(build(), schemas, platform=False)
    assert found == [], "\n".join(map(str, found))


def _task(wf: dict[str, Any], template: str, task: str) -> dict[str, Any]:
    tmpl = next(t for t in wf["spec"]["templates"] if t["name"] == template)
    found: dict[str, Any] = next(t for t in tmpl["dag"]["tasks"] if t["name"] == task)
    return found


def _depends(task: str, clause: str) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        wf = dag_with_depends_outputs_and_artifacts()
        _task(wf, "main", task)["depends"] = clause
        return wf

    return build


def _sequence(**fields: str) -> dict[str, Any]:
    wf = steps_with_groups_when_and_loops()
    main = next(t for t in wf["spec"]["templates"] if t["name"] == "main")
    main["steps"][4][0]["withSequence"].update(fields)
    return wf


TASK_C = "spec.templates[3].dag.tasks[2].depends"
BROKEN: list[Any] = [
    pytest.param(
        lambda: _sequence(formatt="%d"),
        "spec.templates[2].steps[4][0].withSequence.formatt",
        "unknown field 'formatt'",
        id="unknown-field-under-withSequence",
    ),
    pytest.param(
        _depends("c", "b ||"),
        TASK_C,
        "task 'c': depends 'b ||' is not valid",
        id="depends-cut-short",
    ),
    pytest.param(
        _depends("c", "b.Finished"),
        TASK_C,
        "unknown result 'Finished'",
        id="depends-unknown-result",
    ),
    pytest.param(
        _depends("c", "b.Failed || ghost"),
        TASK_C,
        "depends on task 'ghost', which does not exist",
        id="depends-unknown-task",
    ),
    pytest.param(
        _depends("a", "c.AllFailed || !b"),
        "spec.templates[3].dag",
        "dependency cycle: a -> b -> a",
        id="depends-cycle",
    ),
    pytest.param(
        lambda: resources(SERVICE.replace("  ports:", "  portz:")),
        "spec.portz",
        "unknown field 'portz'",
        id="service-unknown-field",
    ),
    pytest.param(
        lambda: resources(SERVICE.replace("{{inputs.parameters.port}}", "http")),
        "spec.ports[0].port",
        "'http' is not of type integer",
        id="service-port-wrong-type",
    ),
    pytest.param(
        lambda: resources(CLAIM.replace("[ReadWriteOnce]", "ReadWriteOnce")),
        "spec.accessModes",
        "'ReadWriteOnce' is not of type array",
        id="claim-field-wrong-type",
    ),
]


@pytest.mark.parametrize(("build", "path", "message"), BROKEN)
def test_broken_workflows_get_the_finding_with_its_path(
    build: Callable[[], dict[str, Any]], schemas: CrdSchemas, path: str, message: str
) -> None:
    found = _errors(build(), schemas)
    hits = [f for f in found if f.path == path and message in f.message]
    assert hits, f"expected {message!r} at {path}; got:\n" + "\n".join(map(str, found))


def test_a_kind_without_any_schema_is_a_warning_naming_it(schemas: CrdSchemas) -> None:
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n"
    found = lint_manifest(resources(widget), schemas, platform=False)
    assert [(f.severity, f.obj, f.path) for f in found] == [
        ("warning", "Widget in template make-0", "apiVersion")
    ]
    assert "'example.com/v1' kind 'Widget'" in found[0].message
    assert f"core Kubernetes {KUBERNETES_VERSION} kind" in found[0].message


def test_core_kinds_are_checked_as_kubernetes_validate_checks_them() -> None:
    """The same schemas and the same first error as ``kubernetes_validate.validate``."""
    import kubernetes_validate

    from gangway.lint.core_kinds import core_validator

    assert kubernetes_validate.latest_version() == KUBERNETES_VERSION, "use the newest schemas"
    service = yaml.safe_load(SERVICE.replace("{{inputs.parameters.port}}", "http"))
    service["metadata"]["name"] = "cache"
    with pytest.raises(kubernetes_validate.ValidationError) as caught:
        kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)
    ours = [list(e.absolute_path) for e in core_validator("v1", "Service").iter_errors(service)]
    assert ours == [list(caught.value.absolute_path)] == [["spec", "ports", 0, "port"]]
    assert core_validator("batch.volcano.sh/v1", "Job") is None  # not batch/v1 Job


def test_a_property_named_like_a_schema_keyword_is_kept() -> None:
    """``format`` is dropped as a keyword, never as a field name; defaults are data."""
    raw = {
        "type": "object",
        "properties": {
            "format": {"type": "string", "format": "byte"},
            "x-kubernetes-list-type": {"type": "string"},
            "count": {"x-kubernetes-int-or-string": True, "default": {"format": "%d"}},
        },
    }
    got = to_json_schema(raw)["properties"]
    assert got["format"] == {"type": "string"}
    assert got["x-kubernetes-list-type"] == {"type": "string"}
    assert got["count"]["default"] == {"format": "%d"}
    assert to_json_schema(raw)["additionalProperties"] is False


def _gangway_lint(*args: str) -> Ran:
    return cli("lint", *args, env={"COLUMNS": "250"})


def test_no_platform_skips_the_platform_rules(schemas: CrdSchemas, tmp_path: Path) -> None:
    """A plain Argo workflow breaks Pod Security "restricted" (a platform rule): an error by
    default, nothing with --no-platform; a kind without a schema is a warning either way."""
    crds = tmp_path / "crds"  # just the Workflow CRD: quicker to load
    crds.mkdir()
    (crds / "workflows.yaml").symlink_to(
        next(Path(schemas.source).rglob("argoproj.io_workflows.yaml"))
    )
    wf = resources("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    wf["spec"]["templates"].append({"name": "plain", "container": {"image": IMAGE}})
    target = tmp_path / "plain.yaml"
    target.write_text(yaml.safe_dump(wf))
    default = _gangway_lint(str(target), "--crds", str(crds))
    assert default.returncode == 1, default.stdout + default.stderr
    assert "allowPrivilegeEscalation" in default.stdout and "must be false" in default.stdout
    argo_only = _gangway_lint(str(target), "--crds", str(crds), "--no-platform")
    assert argo_only.returncode == 0, argo_only.stdout + argo_only.stderr
    assert "allowPrivilegeEscalation" not in argo_only.stdout
    assert "Widget" in argo_only.stdout and "0 error(s), 1 warning(s)" in argo_only.stdout
    assert "platform rules skipped: --no-platform" in argo_only.stdout


def test_help_documents_no_platform() -> None:
    res = _gangway_lint("--help")
    text = " ".join(res.stdout.split())  # as read, whatever the wrapping
    assert res.returncode == 0 and "--no-platform" in text and "platform rules" in text
