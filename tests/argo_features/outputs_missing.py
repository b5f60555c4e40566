"""Outputs a step promised but did not write, with no default and not optional: Argo marks the
node Error (the container itself exited 0) and the workflow does not succeed."""

from hera.workflows import DAG, Artifact, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="outputs-missing", entrypoint="main") as w:
    no_art = sh(
        "no-art", "echo no artifact", outputs=[Artifact(name="gone", path="/tmp/gw-miss/gone.txt")]
    )
    no_param = sh(
        "no-param",
        "echo no parameter",
        outputs=[Parameter(name="gone", value_from=m.ValueFrom(path="/tmp/gw-miss/gone"))],
    )
    with DAG(name="main"):
        Task(name="no-art", template=no_art)
        Task(name="no-param", template=no_param)
