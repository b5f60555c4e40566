"""``when`` after substitution, as govaluate reads it: an unquoted string on one side
(``heads == heads``), numbers from ``{{item}}``, and ``&&`` with a workflow parameter."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="when-expressions", entrypoint="main", arguments={"limit": "7"}) as w:
    flip = sh("flip", "echo heads")
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="flip", template=flip)
        Task(
            name="heads",
            template=say,
            depends="flip",
            when="{{tasks.flip.outputs.result}} == heads",
            arguments={"msg": "it was heads"},
        )
        Task(
            name="tails",
            template=say,
            depends="flip",
            when="{{tasks.flip.outputs.result}} == tails",
            arguments={"msg": "it was tails"},
        )
        Task(
            name="heads-under-limit",
            template=say,
            depends="flip",
            when="{{tasks.flip.outputs.result}} != tails && {{workflow.parameters.limit}} < 10",
            arguments={"msg": "both"},
        )
        Task(
            name="big",
            template=say,
            arguments={"msg": "{{item}}"},
            when="{{item}} > 2",
            with_items=[1, 2, 3, 4],
        )
