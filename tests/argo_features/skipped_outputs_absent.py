"""An absent output (Argo v4.1): a task refers to an output of a Skipped task that has no
``valueFrom.default``, and passes it to an input without a default: Argo fails that task (an
unhandled absent optional), and the workflow with it."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

OUT = "/tmp/gw-absent-out"

with Workflow(name="skipped-outputs-absent", entrypoint="main") as w:
    produce = sh("produce", f"echo made > {OUT}",
                 outputs=[Parameter(name="bare", value_from=m.ValueFrom(path=OUT))])  # fmt: skip
    show = sh("show", "echo {{inputs.parameters.in}}", inputs=[Parameter(name="in")])
    with DAG(name="main"):
        Task(name="producer", template=produce, when="1 == 2")
        Task(name="consumer", template=show, depends="producer",
             arguments={"in": "{{tasks.producer.outputs.parameters.bare}}"})  # fmt: skip
