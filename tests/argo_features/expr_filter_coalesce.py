"""expr closures in ``{{=...}}`` tags: ``filter`` / ``map`` / ``all`` / ``any`` / ``none`` /
``one`` / ``count`` / ``len`` with ``{# ...}`` and ``{.field}``, over a step's JSON output
read by ``jsonpath(..., '$')``; the nil-coalescing ``??`` and optional chaining ``?.`` on keys
an element lacks. A list prints as Go prints it (``[b c]``) unless ``toJson`` makes it JSON."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import echo_input, py

DISKS = "jsonpath(tasks.disks.outputs.result, '$')"


def owner(i: int) -> str:
    """Disk ``i``'s owner's name; ``?.`` ends the chain at a missing owner, ``??`` fills it."""
    return f"{DISKS}[{i}].owner?.name ?? 'nobody'"


with Workflow(name="expr-filter-coalesce", entrypoint="main") as w:
    disks = py(
        "disks",
        "import json; print(json.dumps([{'name': 'a', 'size': 1},"
        " {'name': 'b', 'size': 5, 'owner': {'name': 'ops'}}, {'name': 'c', 'size': 9}]))",
    )
    say = echo_input()
    with DAG(name="main"):
        Task(name="disks", template=disks)
        big = f"filter({DISKS}, {{.size > 2}})"
        for name, msg in [
            ("big-names", f"{{{{=toJson(map({big}, {{.name}}))}}}}"),
            ("big-go", f"{{{{=map({big}, {{#.name}})}}}}"),
            ("count", f"{{{{=len({big})}}}}/{{{{=count({DISKS}, {{.size > 4}})}}}}"),
            (
                "quantifiers",
                f"{{{{=all({DISKS}, {{.size > 0}})}}}} {{{{=any({DISKS}, {{# .size == 9}})}}}}"
                f" {{{{=none({DISKS}, {{.size > 5}})}}}} {{{{=one({DISKS}, {{.size < 2}})}}}}",
            ),
            ("indexed", "{{=toJson(map([10, 20], {# + #index}))}}"),
            ("owners", f"{{{{={owner(0)}}}}}-{{{{={owner(1)}}}}}"),
            ("colour", f"{{{{={DISKS}[2].colour ?? 'grey'}}}}"),
        ]:
            Task(name=name, template=say, depends="disks", arguments={"msg": msg})
