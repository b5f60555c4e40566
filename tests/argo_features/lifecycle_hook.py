"""A task's lifecycle ``hooks: exit`` with arguments taken from the hooked task's result."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="lifecycle-hook", entrypoint="main") as w:
    work = sh("work", "echo payload-7")
    notify = sh("notify", "echo hook saw {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    hook = m.LifecycleHook(
        template="notify",
        arguments=m.Arguments(
            parameters=[m.Parameter(name="msg", value="{{tasks.work.outputs.result}}")]
        ),
    )
    with DAG(name="main"):
        Task(name="work", template=work, hooks={"exit": hook})
