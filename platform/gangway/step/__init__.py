"""The step SDK: what a component needs to be a Gangway step, apart from its own ML code.

A team writing its own components depends on this package (and :mod:`gangway.step.tracking` for
lineage), not on :mod:`components`:

* :func:`main_wrapper` — the entry point: a :class:`~gangway.errors.GangwayError` prints one
  ``error:`` line and exits with its code (1 permanent, 75 transient, 143 preempted), never a
  traceback;
* :func:`emit` — the step's result as one JSON line, and as an output parameter file;
* :func:`parse_overrides` — ``--set key=value`` options;
* :mod:`gangway.step.launch` — ``python -m gangway.step.launch``: torchrun in a gang pod, the
  gang's outcome mapped onto the exit-code contract.

The contract itself (paths, environment, exit codes) is :mod:`gangway.contract`.
"""

from gangway.step.main import emit, main_wrapper, parse_overrides

__all__ = ["emit", "main_wrapper", "parse_overrides"]
