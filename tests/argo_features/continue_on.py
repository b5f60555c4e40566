"""``continueOn: {failed: true}`` in steps: the failed step stays Failed, the next group runs
and sees its status and exit code, and the workflow succeeds."""

from hera.workflows import Parameter, Step, Steps, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="continue-on", entrypoint="main") as w:
    shaky = sh("shaky", "exit 1")
    steady = sh("steady", "echo steady")
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with Steps(name="main") as s:
        with s.parallel():
            Step(name="shaky", template=shaky, continue_on=m.ContinueOn(failed=True))
            Step(name="steady", template=steady)
        Step(
            name="next",
            template=say,
            arguments={"msg": "{{steps.shaky.status}}:{{steps.shaky.exitCode}}"},
        )
