"""``gangway lint`` on resource templates as Argo's executor runs them: what a manifest must be
depends on its action (a whole object to create, just the object's name to get or delete, a
JSON patch, a partial object to merge); ``{{pod.name}}`` is in a resource template's scope; a
WorkflowTemplate may use workflow parameters the Workflow that runs it supplies."""

from __future__ import annotations

from typing import Any

import pytest

from gangway.errors import FieldError
from gangway.lint import CrdSchemas, lint_manifest

Obj = dict[str, Any]
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
WORKFLOW_REF = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: upstream\n"


def acting(resource: Obj, kind: str = "Workflow", **spec: Any) -> Obj:
    """A one-template workflow whose resource template is ``resource``."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "acts"},
        "spec": {"entrypoint": "act", "templates": [{"name": "act", "resource": resource}], **spec},
    }


def lint(obj: Obj, schemas: CrdSchemas) -> list[FieldError]:
    return lint_manifest(obj, schemas, platform=False)


VALID: list[Any] = [
    pytest.param({"action": "get", "manifest": WORKFLOW_REF}, id="get-names-a-workflow"),
    pytest.param({"action": "delete", "manifest": WORKFLOW_REF}, id="delete-names-a-workflow"),
    pytest.param({"action": "delete", "flags": ["configmap", "settings"]}, id="delete-by-flags"),
    pytest.param(
        {
            "action": "patch",
            "mergeStrategy": "json",
            "flags": ["configmap", "settings"],
            "manifest": "- {op: add, path: /data/mode, value: fast}\n- {op: remove, path: /data/a}",
        },
        id="json-patch",
    ),
    pytest.param(
        {
            "action": "patch",
            "mergeStrategy": "merge",
            "flags": ["configmap", "settings"],
            "manifest": "data:\n  mode: fast\n",
        },
        id="merge-patch-by-flags",
    ),
    pytest.param(
        {"action": "patch", "manifest": WORKFLOW_REF + "spec:\n  suspend: true\n"},
        id="strategic-patch-naming-its-object",
    ),
    pytest.param(
        {
            "action": "create",
            "manifest": CONFIG_MAP.replace("settings", "'{{pod.name}}-out'"),
        },
        id="pod-name-in-scope",
    ),
]


@pytest.mark.parametrize("resource", VALID)
def test_valid_resource_actions_lint_clean(resource: Obj, schemas: CrdSchemas) -> None:
    found = lint(acting(resource), schemas)
    assert found == [], "\n".join(map(str, found))


AT = "spec.templates[0].resource.manifest"
BAD: list[Any] = [
    pytest.param(
        {"action": "get", "manifest": "apiVersion: v1\nkind: ConfigMap\n"},
        AT,
        "add metadata.name (its spec is not needed)",
        id="get-without-a-name",
    ),
    pytest.param(
        {"action": "patch", "mergeStrategy": "json", "flags": ["cm", "x"], "manifest": "op: add\n"},
        AT,
        "a list of operations",
        id="json-patch-not-a-list",
    ),
    pytest.param(
        {
            "action": "patch",
            "mergeStrategy": "json",
            "flags": ["cm", "x"],
            "manifest": "- op: upsert\n  path: /data\n",
        },
        f"{AT}[0].op",
        "must be one of add, remove",
        id="json-patch-unknown-op",
    ),
    pytest.param(
        {"action": "patch", "mergeStrategy": "json", "manifest": "- op: remove\n  path: /data\n"},
        AT,
        "give its kind and name in flags",
        id="json-patch-names-nothing",
    ),
    pytest.param(
        {"action": "patch", "mergeStrategy": "merge", "manifest": "data:\n  mode: fast\n"},
        AT,
        "does not name its object",
        id="merge-patch-names-nothing",
    ),
    pytest.param(
        {"action": "patch", "manifest": WORKFLOW_REF + "spec:\n  suspended: true\n"},
        "spec.suspended",
        "unknown field 'suspended'",
        id="strategic-patch-unknown-field",
    ),
]


@pytest.mark.parametrize(("resource", "path", "message"), BAD)
def test_broken_resource_manifests_get_the_finding_at_its_path(
    resource: Obj, path: str, message: str, schemas: CrdSchemas
) -> None:
    found = [f for f in lint(acting(resource), schemas) if f.severity == "error"]
    assert [f.path for f in found] == [path], "\n".join(map(str, found))
    assert message in found[0].message


def test_an_undeclared_workflow_parameter_is_a_warning_only_in_a_workflow_template(
    schemas: CrdSchemas,
) -> None:
    resource = {
        "action": "create",
        "manifest": CONFIG_MAP.replace("settings", "'{{workflow.parameters.who}}'"),
    }
    template = lint(acting(resource, "WorkflowTemplate"), schemas)
    assert [(f.severity, f.path) for f in template] == [("warning", AT)]
    assert "the Workflow that uses this template must supply it" in template[0].message
    workflow = lint(acting(resource), schemas)
    assert [(f.severity, f.path) for f in workflow if f.severity == "error"][:1] == [("error", AT)]
    assert "is not a workflow parameter" in workflow[0].message
