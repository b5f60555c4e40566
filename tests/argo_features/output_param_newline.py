"""Output parameters read from ``valueFrom.path`` lose one trailing newline, as Argo's executor
trims them (a file ending in two keeps one; a ``default`` is trimmed too)."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="output-param-newline", entrypoint="main") as w:
    write = sh(
        "write",
        "mkdir -p /tmp/gw-nl && echo 42 > /tmp/gw-nl/one && printf 'a\\n\\n' > /tmp/gw-nl/two"
        " && printf 'x\\r\\n' > /tmp/gw-nl/crlf",
        outputs=[
            Parameter(name="one", value_from=m.ValueFrom(path="/tmp/gw-nl/one")),
            Parameter(name="two", value_from=m.ValueFrom(path="/tmp/gw-nl/two")),
            Parameter(name="crlf", value_from=m.ValueFrom(path="/tmp/gw-nl/crlf")),
            Parameter(
                name="fallback",
                value_from=m.ValueFrom(path="/tmp/gw-nl/never", default="unset\n"),
            ),
        ],
    )
    say = sh("say", "echo '[{{inputs.parameters.msg}}]'", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="write", template=write)
        Task(
            name="read",
            template=say,
            depends="write",
            arguments={"msg": "{{tasks.write.outputs.parameters.one}}"},
        )
