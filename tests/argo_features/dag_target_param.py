"""``dag.target`` from a workflow parameter: Argo fills it like any field of the template, so
only ``b`` and what it depends on (``a``) run; ``c`` never gets a node."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(
    name="dag-target-param",
    entrypoint="main",
    arguments=[Parameter(name="target", value="b")],
) as w:
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main", target="{{workflow.parameters.target}}"):
        a = Task(name="a", template=say, arguments={"msg": "A"})
        b = Task(name="b", template=say, arguments={"msg": "B"})
        c = Task(name="c", template=say, arguments={"msg": "C"})
        a >> b
        a >> c
