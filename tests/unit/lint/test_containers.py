"""The platform's Pod Security rules on every container Argo puts in a pod — main, sidecars,
init containers, a containerSet's, an inline template's (DAG task or step), what
``spec.templateDefaults`` and a ``podSpecPatch`` add — each finding at the field where the
value is written. No CRDs needed: the schemas are not what is tested here."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from gangway.config import EXAMPLE, load_config
from gangway.errors import FieldError
from gangway.lint import lint_manifest

CFG = load_config(EXAMPLE)
IMAGE = "ghcr.io/gangway/tools:1"
SAFE = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
Obj = dict[str, Any]


def box(name: str | None = None, **security: Any) -> Obj:
    """A container that meets Pod Security restricted, ``security`` over its context."""
    sc = {**copy.deepcopy(SAFE), **security}
    c: Obj = {"image": IMAGE, "command": ["true"], "securityContext": sc}
    return {"name": name, **c} if name else c


def workflow(*templates: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "boxes-"},
        "spec": {"entrypoint": templates[0]["name"], "templates": list(templates), **spec},
    }


def every_kind_of_container() -> Obj:
    """A valid workflow with each kind of container, all restricted."""
    return workflow(
        {
            "name": "main",
            "dag": {
                "tasks": [
                    {"name": "helped", "template": "helped"},
                    {"name": "set", "template": "set", "depends": "helped"},
                    {"name": "quick", "inline": {"container": box()}, "depends": "set"},
                ]
            },
        },
        {
            "name": "helped",
            "container": box(),
            "sidecars": [box("cache")],
            "initContainers": [box("fetch")],
            "podSpecPatch": json.dumps({"containers": [{"name": "main", "resources": {}}]}),
        },
        {"name": "set", "containerSet": {"containers": [box("a"), box("b")]}},
        {
            "name": "stepped",
            "steps": [[{"name": "one", "inline": {"script": box() | {"source": "x"}}}]],
        },
    )


def with_defaults() -> Obj:
    """The securityContext comes from templateDefaults alone: valid."""
    bare = {"image": IMAGE, "command": ["true"]}
    return workflow(
        {"name": "main", "container": bare},
        templateDefaults={"container": {"securityContext": copy.deepcopy(SAFE)}},
    )


def errors(obj: Obj) -> list[FieldError]:
    return [f for f in lint_manifest(obj, None, CFG) if f.severity == "error"]


@pytest.mark.parametrize("build", [every_kind_of_container, with_defaults])
def test_restricted_containers_of_every_kind_lint_clean(build: Callable[[], Obj]) -> None:
    found = lint_manifest(build(), None, CFG)
    assert found == [], "\n".join(map(str, found))


def _at(template: int, *keys: Any) -> Callable[[Obj], Obj]:
    """An edit: the container at ``keys`` under template ``template`` made privileged."""

    def edit(wf: Obj) -> Obj:
        node: Any = wf["spec"]["templates"][template]
        for k in keys:
            node = node[k]
        node["securityContext"]["privileged"] = True
        return wf

    return edit


def _patch(where: str, patch: str) -> Callable[[Obj], Obj]:
    def edit(wf: Obj) -> Obj:
        holder = wf["spec"] if where == "spec" else wf["spec"]["templates"][1]
        holder["podSpecPatch"] = patch
        return wf

    return edit


def _defaults(wf: Obj) -> Obj:
    wf["spec"]["templateDefaults"]["container"]["securityContext"]["privileged"] = True
    return wf


PRIVILEGED = "securityContext.privileged"
BAD: list[Any] = [
    pytest.param(
        _at(1, "sidecars", 0), f"spec.templates[1].sidecars[0].{PRIVILEGED}", id="sidecar"
    ),
    pytest.param(
        _at(1, "initContainers", 0), f"spec.templates[1].initContainers[0].{PRIVILEGED}", id="init"
    ),
    pytest.param(
        _at(2, "containerSet", "containers", 1),
        f"spec.templates[2].containerSet.containers[1].{PRIVILEGED}",
        id="container-set",
    ),
    pytest.param(
        _at(0, "dag", "tasks", 2, "inline", "container"),
        f"spec.templates[0].dag.tasks[2].inline.container.{PRIVILEGED}",
        id="inline-dag-task",
    ),
    pytest.param(
        _at(3, "steps", 0, 0, "inline", "script"),
        f"spec.templates[3].steps[0][0].inline.script.{PRIVILEGED}",
        id="inline-step",
    ),
    pytest.param(
        _patch(
            "template",
            '{"containers": [{"name": "cache", "securityContext": {"privileged": true}}]}',
        ),
        f"spec.templates[1].podSpecPatch.containers[0].{PRIVILEGED}",
        id="template-pod-spec-patch",
    ),
    pytest.param(
        _patch("spec", "hostPID: true\n"), "spec.podSpecPatch.hostPID", id="workflow-pod-spec-patch"
    ),
    pytest.param(
        _patch("template", "initContainers:\n- name: debug\n  image: x\n"),
        "spec.templates[1].podSpecPatch.initContainers[0].securityContext.*",
        id="patch-adds-a-container",
    ),
]


@pytest.mark.parametrize(("edit", "path"), BAD)
def test_each_container_is_checked_at_its_path(edit: Callable[[Obj], Obj], path: str) -> None:
    found = errors(edit(every_kind_of_container()))
    got = [f.path for f in found]
    if path.endswith(".*"):  # a container of the patch's own: each rule it misses
        assert got and all(p.startswith(path[:-1]) for p in got), got
        assert f"{path[:-1]}runAsNonRoot" in got
    else:
        assert got == [path], "\n".join(map(str, found))


def test_a_value_from_template_defaults_is_reported_where_the_defaults_write_it() -> None:
    found = errors(_defaults(with_defaults()))
    assert [f.path for f in found] == [f"spec.templateDefaults.container.{PRIVILEGED}"]
    overridden = _defaults(with_defaults())
    overridden["spec"]["templates"][0]["container"]["securityContext"] = {"privileged": False}
    assert errors(overridden) == []  # its own value wins; the rest comes from the defaults


def test_an_unreadable_pod_spec_patch_is_a_warning() -> None:
    wf = _patch("template", "{not: [valid")(every_kind_of_container())
    found = lint_manifest(wf, None, CFG)
    assert [(f.severity, f.path) for f in found] == [("warning", "spec.templates[1].podSpecPatch")]


def test_a_workflow_host_path_volume_is_reported_once_at_the_workflow() -> None:
    wf = every_kind_of_container()
    wf["spec"]["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    assert [f.path for f in errors(wf)] == ["spec.volumes[0].hostPath"]
