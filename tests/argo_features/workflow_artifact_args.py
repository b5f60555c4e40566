"""``spec.arguments.artifacts``: the workflow's artifact arguments are the entrypoint's input
artifacts, by name — here a ``raw`` one, which the entrypoint's DAG passes on to a task with
``from: "{{inputs.artifacts.greeting}}"``."""

from hera.workflows import DAG, Artifact, RawArtifact, Task, Workflow

from tests.argo_features._build import sh

with Workflow(
    name="workflow-artifact-args",
    entrypoint="main",
    arguments=[RawArtifact(name="greeting", data="hello from the workflow")],
) as w:
    show = sh("show", "cat /tmp/gw-greeting.txt",
              inputs=[Artifact(name="g", path="/tmp/gw-greeting.txt")])  # fmt: skip
    with DAG(name="main", inputs=[Artifact(name="greeting")]):
        Task(name="show", template=show,
             arguments=[Artifact(name="g", from_="{{inputs.artifacts.greeting}}")])  # fmt: skip
