"""A ``suspend`` template with ``duration: "1"``: the step waits one second, then the workflow
goes on by itself."""

from hera.workflows import Step, Steps, Suspend, Workflow

from tests.argo_features._build import sh

with Workflow(name="suspend-duration", entrypoint="main") as w:
    before = sh("before", "echo before")
    after = sh("after", "echo after")
    pause = Suspend(name="pause", duration="1")
    with Steps(name="main"):
        Step(name="before", template=before)
        Step(name="pause", template=pause)
        Step(name="after", template=after)
