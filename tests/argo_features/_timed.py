"""The timed DAG shared by the parallelism workflows: three independent tasks, each sleeping
0.4 s and printing ``START END`` (seconds since the epoch) as its result."""

from __future__ import annotations

from hera.workflows import DAG, Task

from tests.argo_features._build import py

STAMP = "import time; start = time.time(); time.sleep(0.4); print(f'{start:.3f} {time.time():.3f}')"

__all__ = ["timed_dag"]


def timed_dag() -> None:
    """Add the ``stamp`` template and the ``main`` DAG of three tasks to the open workflow."""
    stamp = py("stamp", STAMP)
    with DAG(name="main"):
        for name in ("one", "two", "three"):
            Task(name=name, template=stamp)
