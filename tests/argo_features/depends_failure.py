"""A failure nobody handles: the tasks that needed it are Omitted (``depends`` and legacy
``dependencies``, and ``.AnySucceeded`` of a loop whose items all failed), and the workflow
fails."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="depends-failure", entrypoint="main") as w:
    ok = sh("ok", "echo ok")
    boom = sh("boom", "exit 1")
    code = sh("code", "exit {{inputs.parameters.c}}", inputs=[Parameter(name="c")])
    with DAG(name="main"):
        Task(name="bad", template=boom)
        Task(name="after", template=ok, depends="bad")
        Task(name="legacy", template=ok, dependencies=["bad"])
        Task(name="all-bad", template=code, arguments={"c": "{{item}}"}, with_items=[1, 2])
        Task(name="needs-one", template=ok, depends="all-bad.AnySucceeded")
