"""A fan-out of six ``sleep 1`` items and no parallelism anywhere: Argo runs them all at
once, so the workflow takes about one second, not six."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="fanout-unbounded", entrypoint="main") as w:
    nap = sh("nap", "sleep 1")
    with DAG(name="main"):
        Task(name="nap", template=nap, with_items=list(range(6)))
