"""A workflow ``onExit`` handler (a steps template) that branches on ``{{workflow.status}}``
after the main DAG succeeded."""

from hera.workflows import DAG, Parameter, Step, Steps, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="exit-handler-succeeded", entrypoint="main", on_exit="report") as w:
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="work", template=say, arguments={"msg": "working"})
    with Steps(name="report"):
        Step(
            name="celebrate",
            template=say,
            when="{{workflow.status}} == Succeeded",
            arguments={"msg": "status={{workflow.status}}"},
        )
        Step(
            name="mourn",
            template=say,
            when="{{workflow.status}} != Succeeded",
            arguments={"msg": "status={{workflow.status}}"},
        )
