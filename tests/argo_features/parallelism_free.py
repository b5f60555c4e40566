"""No workflow ``parallelism``: three independent tasks run at the same time."""

from hera.workflows import Workflow

from tests.argo_features._timed import timed_dag

with Workflow(name="parallelism-free", entrypoint="main") as w:
    timed_dag()
