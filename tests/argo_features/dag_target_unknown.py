"""``dag.target`` naming no task once filled: Argo ends the workflow in Error ("target nope
does not exist") without running a task (a literal one is refused when it is submitted)."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(
    name="dag-target-unknown",
    entrypoint="main",
    arguments=[Parameter(name="target", value="nope")],
) as w:
    say = sh("say", "echo hi")
    with DAG(name="main", target="{{workflow.parameters.target}}"):
        Task(name="a", template=say)
        Task(name="b", template=say)
