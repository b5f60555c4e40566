"""Workflow ``parallelism: 1``: of three independent tasks only one runs at a time."""

from hera.workflows import Workflow

from tests.argo_features._timed import timed_dag

with Workflow(name="parallelism-one", entrypoint="main", parallelism=1) as w:
    timed_dag()
