"""Local execution of a compiled Argo Workflow: the same object that is sent to the cluster.

:func:`run_pipeline` (and :func:`retry_pipeline`) is the library call behind ``gangway run``
(and ``gangway retry``): compile, record, execute, record the end in MLflow
(:mod:`gangway.local.session`, :mod:`gangway.local.runs`).

:class:`LocalExecutor` runs the compiled manifest with Argo's semantics — DAG and steps
templates (nested, recursive), parameters, ``outputs.result``, artifacts, fan-out, ``when``,
the full ``depends`` grammar, ``retryStrategy`` on any template, exit handlers and hooks,
``suspend``, daemons, containerSets, volumes — each container as a process of this machine;
a Volcano Job step runs its pods' command, one process per pod, on 127.0.0.1 with the
environment Volcano's pytorch plugin would inject. Constructs it does not support are
refused up front with the construct named (:class:`UnsupportedConstruct`).
"""

from gangway.local._clock import Clock
from gangway.local._results import NodeResult, Outcome, RunResult, UnsupportedConstruct
from gangway.local._suspend import resume
from gangway.local.executor import LocalExecutor
from gangway.local.session import Finished, Watch, retry_pipeline, run_pipeline
from gangway.local.workflow import workflow_from_template

__all__ = [
    "Clock",
    "Finished",
    "LocalExecutor",
    "NodeResult",
    "Outcome",
    "RunResult",
    "UnsupportedConstruct",
    "Watch",
    "resume",
    "retry_pipeline",
    "run_pipeline",
    "workflow_from_template",
]
