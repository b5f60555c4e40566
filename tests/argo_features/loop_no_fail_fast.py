"""The same loop without ``failFast`` (Argo's default for a template): every item runs one at
a time, ``later`` too, and the failed item fails the step and the workflow."""

from hera.workflows import Parameter, Step, Steps, Workflow

from tests.argo_features._build import sh

with Workflow(name="loop-no-fail-fast", entrypoint="main") as w:
    check = sh("check", "test {{inputs.parameters.v}} != bad", inputs=[Parameter(name="v")])
    done = sh("done", "echo done")
    with Steps(name="main", parallelism=1):
        Step(
            name="each",
            template=check,
            arguments={"v": "{{item}}"},
            with_items=["ok", "bad", "later"],
        )
        Step(name="after", template=done)
