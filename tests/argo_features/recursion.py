"""Bounded recursion: a steps template that calls itself with a smaller counter until its
``when`` is false. The entrypoint takes ``n`` from the workflow's arguments."""

from hera.workflows import Parameter, Step, Steps, Workflow

from tests.argo_features._build import py

with Workflow(name="recursion", entrypoint="countdown", arguments={"n": "3"}) as w:
    dec = py("dec", "print(int('{{inputs.parameters.n}}') - 1)", inputs=[Parameter(name="n")])
    with Steps(name="countdown", inputs=[Parameter(name="n")]):
        Step(name="dec", template=dec, arguments={"n": "{{inputs.parameters.n}}"})
        Step(
            name="again",
            template="countdown",
            arguments={"n": "{{steps.dec.outputs.result}}"},
            when="{{steps.dec.outputs.result}} > 0",
        )
