"""The legacy ``dependencies: [..]`` list: a diamond whose last task joins both branches."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="legacy-dependencies", entrypoint="main") as w:
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="a", template=say, arguments={"msg": "A"})
        Task(
            name="b",
            template=say,
            dependencies=["a"],
            arguments={"msg": "{{tasks.a.outputs.result}}B"},
        )
        Task(
            name="c",
            template=say,
            dependencies=["a"],
            arguments={"msg": "{{tasks.a.outputs.result}}C"},
        )
        Task(
            name="d",
            template=say,
            dependencies=["b", "c"],
            arguments={"msg": "{{tasks.b.outputs.result}}+{{tasks.c.outputs.result}}"},
        )
