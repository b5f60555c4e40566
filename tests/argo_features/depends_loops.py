"""``.AnySucceeded`` and ``.AllFailed`` on fanned-out tasks: one loop with one success, one
loop whose items all fail; both failures are handled, so the workflow succeeds."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="depends-loops", entrypoint="main") as w:
    ok = sh("ok", "echo ok")
    code = sh("code", "exit {{inputs.parameters.c}}", inputs=[Parameter(name="c")])
    with DAG(name="main"):
        Task(name="mixed", template=code, arguments={"c": "{{item}}"}, with_items=[0, 1, 2])
        Task(name="all-bad", template=code, arguments={"c": "{{item}}"}, with_items=[3, 4])
        Task(name="any-ok", template=ok, depends="mixed.AnySucceeded")
        Task(name="all-failed", template=ok, depends="all-bad.AllFailed")
