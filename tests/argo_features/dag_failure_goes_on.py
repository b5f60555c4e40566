"""A failed task does not stop a DAG (``dag.failFast`` left at its default, true): Argo still
starts every task that becomes ready — ``after`` waits for ``slow``, which ends after ``bad``
has failed — Omits what needed ``bad``, and fails the workflow once all have ended."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-failure-goes-on", entrypoint="main") as w:
    boom = sh("boom", "exit 1")
    slow = sh("slow", "sleep 0.3; echo slow")
    ok = sh("ok", "echo ok")
    with DAG(name="main"):
        bad = Task(name="bad", template=boom)
        s = Task(name="slow", template=slow)
        Task(name="after", template=ok, depends="slow")
        Task(name="needs-bad", template=ok, depends="bad")
