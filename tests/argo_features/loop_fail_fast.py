"""A steps template with ``parallelism: 1`` and ``failFast: true`` whose step fans out: Argo
starts no item after ``bad`` failed (``later`` never gets a node), fails the template with
"template has failed or errored children and failFast enabled", and runs no later group."""

from hera.workflows import Parameter, Step, Steps, Workflow

from tests.argo_features._build import sh

with Workflow(name="loop-fail-fast", entrypoint="main") as w:
    check = sh("check", "test {{inputs.parameters.v}} != bad", inputs=[Parameter(name="v")])
    done = sh("done", "echo done")
    with Steps(name="main", parallelism=1, fail_fast=True):
        Step(
            name="each",
            template=check,
            arguments={"v": "{{item}}"},
            with_items=["ok", "bad", "later"],
        )
        Step(name="after", template=done)
