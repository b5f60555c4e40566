"""A DAG with ``parallelism: 2`` whose one task fans out over four items: Argo runs at most
two of the items at once (they are the DAG's children), each printing ``START END``."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import py
from tests.argo_features._timed import STAMP

with Workflow(name="loop-parallelism", entrypoint="main") as w:
    stamp = py("stamp", STAMP)
    with DAG(name="main", parallelism=2):
        Task(name="each", template=stamp, with_items=[1, 2, 3, 4])
