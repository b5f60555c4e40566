"""``jsonpath()`` filters as Argo's helper (evilmonkeyinc/jsonpath) reads them:
``[?(@.name=="x")]``, comparisons, ``&&``, and the rest of the path run on each match (a list),
indexed with ``[0]``; a filter inside a ``when`` tag."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import echo_input, py

INV = "tasks.inventory.outputs.result"

with Workflow(name="jsonpath-filter", entrypoint="main") as w:
    inventory = py(
        "inventory",
        "import json; print(json.dumps({'items': [{'name': 'x', 'value': '42', 'size': 3},"
        " {'name': 'y', 'value': '7', 'size': 12}, {'name': 'z', 'value': '5'}]}))",
    )
    say = echo_input()
    with DAG(name="main"):
        Task(name="inventory", template=inventory)
        for name, path in [
            ("pick", '$.items[?(@.name=="x")].value'),
            ("large", "$.items[?(@.size > 5)].name"),
            ("between", "$.items[?(@.size >= 3 && @.size < 10)].name"),
            ("not-x", "$.items[?(@.name != 'x')].name"),
        ]:
            Task(
                name=name,
                template=say,
                depends="inventory",
                arguments={"msg": f"{{{{=toJson(jsonpath({INV}, `{path}`))}}}}"},
            )
        Task(
            name="first",
            template=say,
            depends="inventory",
            arguments={"msg": f"{{{{=jsonpath({INV}, '$.items[?(@.size > 1)].value')[0]}}}}"},
        )
        Task(
            name="when-large",
            template=say,
            depends="inventory",
            when=f"{{{{=len(jsonpath({INV}, '$.items[?(@.size > 10)]'))}}}} > 0",
            arguments={"msg": "large"},
        )
        Task(
            name="when-huge",
            template=say,
            depends="inventory",
            when=f"{{{{=len(jsonpath({INV}, '$.items[?(@.size > 100)]'))}}}} > 0",
            arguments={"msg": "huge"},
        )
