"""``outputs.result`` of a script and of a container (their stdout) feeding the next task, and
``{{tasks.X.exitCode}}`` of a task that failed (``continueOn``) and of one that succeeded."""

from hera.workflows import DAG, Parameter, Script, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import IMAGE, sh

with Workflow(name="outputs-result", entrypoint="main") as w:
    calc = Script(name="calc", image=IMAGE, command=["python"], source="print(6 * 7)")
    shout = sh("shout", "echo loud")
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    quit3 = sh("quit3", "echo leaving; exit 3")
    with DAG(name="main"):
        Task(name="calc", template=calc)
        Task(name="shout", template=shout)
        Task(
            name="both",
            template=say,
            depends="calc && shout",
            arguments={"msg": "{{tasks.calc.outputs.result}}-{{tasks.shout.outputs.result}}"},
        )
        Task(name="quit", template=quit3, continue_on=m.ContinueOn(failed=True))
        Task(
            name="codes",
            template=say,
            depends="quit.Failed && shout.Succeeded",
            arguments={"msg": "{{tasks.quit.exitCode}}/{{tasks.shout.exitCode}}"},
        )
