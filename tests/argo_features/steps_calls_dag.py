"""A steps entrypoint whose second step calls a DAG template."""

from hera.workflows import DAG, Parameter, Step, Steps, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="steps-calls-dag", entrypoint="main") as w:
    prep = sh("prep", "echo p")
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="pair", inputs=[Parameter(name="msg")]):
        Task(name="x", template=say, arguments={"msg": "x-{{inputs.parameters.msg}}"})
        Task(name="y", template=say, depends="x", arguments={"msg": "{{tasks.x.outputs.result}}-y"})
    with Steps(name="main"):
        Step(name="prep", template=prep)
        Step(name="inner", template="pair", arguments={"msg": "{{steps.prep.outputs.result}}"})
