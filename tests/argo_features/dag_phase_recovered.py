"""A failure a later task recovers from does not fail the DAG: ``d`` depends on
``a && (b || c)``, ``b`` fails, ``c`` and then ``d`` succeed. Argo reads a DAG's phase from its
target tasks (here the leaf ``d``), so the workflow Succeeds (``assessDAGPhase``)."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-phase-recovered", entrypoint="main") as w:
    boom = sh("boom", "exit 1")
    ok = sh("ok", "echo ok")
    with DAG(name="main"):
        Task(name="a", template=ok)
        Task(name="b", template=boom, depends="a")
        Task(name="c", template=ok, depends="a")
        Task(name="d", template=ok, depends="a && (b || c)")
