"""Outputs of a DAG template (``valueFrom.parameter``) and of a steps template
(``valueFrom.parameter`` of a result), and a DAG output chosen by ``valueFrom.expression``;
the caller reads them as ``{{tasks.T.outputs.parameters.P}}``."""

from hera.workflows import DAG, Parameter, Step, Steps, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import py, sh

with Workflow(name="template-outputs", entrypoint="main") as w:
    add = py(
        "add",
        "import os; os.makedirs('/tmp/gw-sum', exist_ok=True);"
        " open('/tmp/gw-sum/value', 'w').write(str(2 + 3))",
        outputs=[Parameter(name="sum", value_from=m.ValueFrom(path="/tmp/gw-sum/value"))],
    )
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(
        name="calc",
        outputs=[
            Parameter(
                name="total",
                value_from=m.ValueFrom(parameter="{{tasks.add.outputs.parameters.sum}}"),
            )
        ],
    ):
        Task(name="add", template=add)
    with Steps(
        name="words",
        outputs=[
            Parameter(
                name="joined", value_from=m.ValueFrom(parameter="{{steps.two.outputs.result}}")
            )
        ],
    ):
        Step(name="one", template=say, arguments={"msg": "alpha"})
        Step(name="two", template=say, arguments={"msg": "{{steps.one.outputs.result}}-beta"})
    pick_expr = (
        "tasks.flip.outputs.result == 'heads'"
        " ? tasks.heads.outputs.result : tasks.tails.outputs.result"
    )
    with DAG(
        name="pick",
        outputs=[Parameter(name="chosen", value_from=m.ValueFrom(expression=pick_expr))],
    ):
        Task(name="flip", template=say, arguments={"msg": "heads"})
        Task(
            name="heads",
            template=say,
            depends="flip",
            when="{{tasks.flip.outputs.result}} == heads",
            arguments={"msg": "picked-heads"},
        )
        Task(
            name="tails",
            template=say,
            depends="flip",
            when="{{tasks.flip.outputs.result}} == tails",
            arguments={"msg": "picked-tails"},
        )
    with DAG(name="main"):
        Task(name="calc", template="calc")
        Task(name="words", template="words")
        Task(name="pick", template="pick")
        Task(
            name="show",
            template=say,
            depends="calc && words && pick",
            arguments={
                "msg": "{{tasks.calc.outputs.parameters.total}}"
                " {{tasks.words.outputs.parameters.joined}}"
                " {{tasks.pick.outputs.parameters.chosen}}"
            },
        )
