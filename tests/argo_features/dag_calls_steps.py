"""A DAG entrypoint whose first task calls a steps template, then a task after it."""

from hera.workflows import DAG, Parameter, Step, Steps, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-calls-steps", entrypoint="main") as w:
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with Steps(name="seq"):
        Step(name="one", template=say, arguments={"msg": "1"})
        Step(name="two", template=say, arguments={"msg": "{{steps.one.outputs.result}}2"})
    with DAG(name="main"):
        Task(name="inner", template="seq")
        Task(name="after", template=say, depends="inner", arguments={"msg": "done"})
