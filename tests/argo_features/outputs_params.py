"""Output parameters of a leaf: ``valueFrom.path``, ``valueFrom.default`` for a file the step
never wrote, and a ``globalName`` that becomes ``workflow.outputs.parameters.NAME``."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="outputs-params", entrypoint="main") as w:
    write = sh(
        "write",
        "mkdir -p /tmp/gw-params && printf 42 > /tmp/gw-params/answer"
        " && printf blue > /tmp/gw-params/colour",
        outputs=[
            Parameter(name="answer", value_from=m.ValueFrom(path="/tmp/gw-params/answer")),
            Parameter(
                name="fallback",
                value_from=m.ValueFrom(path="/tmp/gw-params/never-written", default="unset"),
            ),
            Parameter(
                name="colour",
                value_from=m.ValueFrom(path="/tmp/gw-params/colour"),
                global_name="favourite-colour",
            ),
        ],
    )
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="write", template=write)
        Task(
            name="read",
            template=say,
            depends="write",
            arguments={
                "msg": "{{tasks.write.outputs.parameters.answer}}"
                " {{tasks.write.outputs.parameters.fallback}}"
                " {{workflow.outputs.parameters.favourite-colour}}"
            },
        )
