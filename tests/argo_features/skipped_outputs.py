"""The outputs of a task that did not run (Argo v4.1): ``{{tasks.X.outputs.parameters.Y}}`` of
a Skipped task is its template's ``valueFrom.default``; an output without one is absent, and
an argument that is only a reference to it is dropped when the consuming input has a
default (which it then gets). An Omitted task's outputs are the same."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

OUT = "/tmp/gw-skipped-out"

with Workflow(name="skipped-outputs", entrypoint="main") as w:
    produce = sh(
        "produce",
        f"echo made > {OUT}",
        outputs=[
            Parameter(name="msg", value_from=m.ValueFrom(path=OUT, default="fallback")),
            Parameter(name="bare", value_from=m.ValueFrom(path=OUT)),
        ],
    )
    gate = sh("gate", "echo open")
    show = sh("show", "echo {{inputs.parameters.in}}", inputs=[Parameter(name="in")])
    mine = sh("mine", "echo {{inputs.parameters.in}}",
              inputs=[Parameter(name="in", default="mine")])  # fmt: skip
    with DAG(name="main"):
        Task(name="producer", template=produce, when="1 == 2")
        Task(name="gate", template=gate)
        Task(name="omitted", template=produce, depends="gate.Failed")
        Task(name="use-default", template=show, depends="producer",
             arguments={"in": "{{tasks.producer.outputs.parameters.msg}}"})  # fmt: skip
        Task(name="use-input-default", template=mine, depends="producer",
             arguments={"in": "{{tasks.producer.outputs.parameters.bare}}"})  # fmt: skip
        Task(name="use-omitted", template=show, depends="omitted.Omitted",
             arguments={"in": "{{tasks.omitted.outputs.parameters.msg}}"})  # fmt: skip
