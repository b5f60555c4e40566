"""A literal ``dag.target`` naming no task: Argo refuses the workflow when it is submitted
("templates.main.targets: target 'nope' is not defined")."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-target-literal", entrypoint="main") as w:
    say = sh("say", "echo hi")
    with DAG(name="main", target="a nope"):
        Task(name="a", template=say)
