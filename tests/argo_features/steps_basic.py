"""Steps: sequential groups, two parallel steps in one group, a ``when`` that skips a step."""

from hera.workflows import Parameter, Step, Steps, Workflow

from tests.argo_features._build import sh

with Workflow(name="steps-basic", entrypoint="main") as w:
    first = sh("first", "echo one")
    tag = sh(
        "tag",
        "echo {{inputs.parameters.side}}-{{inputs.parameters.seed}}",
        inputs=[Parameter(name="side"), Parameter(name="seed")],
    )
    join = sh("join", "echo {{inputs.parameters.both}}", inputs=[Parameter(name="both")])
    with Steps(name="main") as s:
        Step(name="first", template=first)
        with s.parallel():
            seed = "{{steps.first.outputs.result}}"
            Step(name="left", template=tag, arguments={"side": "L", "seed": seed})
            Step(name="right", template=tag, arguments={"side": "R", "seed": seed})
            Step(name="never", template=first, when="{{steps.first.outputs.result}} == two")
        Step(
            name="join",
            template=join,
            arguments={"both": "{{steps.left.outputs.result}}+{{steps.right.outputs.result}}"},
        )
