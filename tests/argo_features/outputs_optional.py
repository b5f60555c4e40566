"""An ``optional`` output artifact the step never writes: the step still succeeds."""

from hera.workflows import DAG, Artifact, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="outputs-optional", entrypoint="main") as w:
    maybe = sh(
        "maybe",
        "echo wrote nothing",
        outputs=[Artifact(name="extra", path="/tmp/gw-opt/extra.txt", optional=True)],
    )
    with DAG(name="main"):
        Task(name="maybe", template=maybe)
        Task(name="after", template=sh("after", "echo after"), depends="maybe")
