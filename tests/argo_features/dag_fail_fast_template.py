"""A DAG with ``failFast: true`` (Hera sets the template's and ``dag.failFast``) and
``parallelism: 1``: ``bad`` runs first and fails, then Argo starts no other task of the DAG
(their nodes never exist) and fails it with "template has failed or errored children and
failFast enabled"."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dag-fail-fast-template", entrypoint="main") as w:
    boom = sh("boom", "exit 1")
    ok = sh("ok", "echo ok")
    with DAG(name="main", parallelism=1, fail_fast=True):
        Task(name="bad", template=boom)
        Task(name="x", template=ok)
        Task(name="y", template=ok)
