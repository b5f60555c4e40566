"""A ``suspend`` template without a duration: the workflow waits until someone resumes it."""

from hera.workflows import Step, Steps, Suspend, Workflow

from tests.argo_features._build import sh

with Workflow(name="suspend-manual", entrypoint="main") as w:
    before = sh("before", "echo before")
    after = sh("after", "echo approved")
    approve = Suspend(name="approve")
    with Steps(name="main"):
        Step(name="before", template=before)
        Step(name="approve", template=approve)
        Step(name="after", template=after)
