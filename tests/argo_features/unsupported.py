"""Three templates a local run cannot emulate, all called from the entrypoint: a ``resource``
template creating a ConfigMap, an ``http`` template, and an executor ``plugin`` template.

Hera 7.1 models ``plugin`` as an empty object, so this workflow adds the plugin's body when it
is compiled."""

from __future__ import annotations

from typing import Any

from hera.workflows import DAG, HTTP, Resource, Task, Workflow
from hera.workflows import models as m

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  generateName: gw-settings-
data:
  mode: cluster
"""

PLUGIN_BODY = {"hello": {"greeting": "hi"}}


class _PluginWorkflow(Workflow):
    """A Workflow whose ``run-plugin`` template keeps its plugin body when compiled."""

    def to_dict(self) -> Any:
        compiled = super().to_dict()
        for template in compiled["spec"]["templates"]:
            if template["name"] == "run-plugin":
                template["plugin"] = dict(PLUGIN_BODY)
        return compiled


with _PluginWorkflow(name="unsupported", entrypoint="main", kind="Workflow") as w:
    Resource(name="make-configmap", action="create", manifest=CONFIGMAP)
    HTTP(name="call-webhook", url="http://127.0.0.1:9/hook", method="POST")
    w.templates.append(m.Template(name="run-plugin", plugin=m.Plugin()))
    with DAG(name="main"):
        Task(name="configmap", template="make-configmap")
        Task(name="webhook", template="call-webhook")
        Task(name="plugin", template="run-plugin")
