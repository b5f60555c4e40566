"""A handled-looking failure still fails the DAG when a leaf that needed success is Omitted:
``flip`` fails, ``on-failure`` (``flip.Failed``) runs, ``on-success`` (``flip.Succeeded``) is
Omitted and takes the phase of its branch, Failed. Argo ends the workflow Failed
(``assessDAGPhase``: an omitted target inherits its parent's phase)."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-phase-omitted-leaf", entrypoint="main") as w:
    boom = sh("boom", "exit 1")
    ok = sh("ok", "echo ok")
    with DAG(name="main"):
        Task(name="flip", template=boom)
        Task(name="on-success", template=ok, depends="flip.Succeeded")
        Task(name="on-failure", template=ok, depends="flip.Failed")
