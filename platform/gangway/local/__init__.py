"""Local execution of a compiled Argo Workflow: the same object that is sent to the cluster.

:class:`LocalExecutor` walks the DAG of the compiled manifest — parameters, outputs, ``withParam``
/ ``withItems`` fan-out, ``when``, ``retryStrategy`` — and runs each step's container command in
a subprocess; a Volcano Job step runs its pods' command, one process per pod, on 127.0.0.1 with
the environment Volcano's pytorch plugin would inject. Constructs it does not support are
refused up front with the construct named (:class:`UnsupportedConstruct`).
"""

from gangway.local._model import NodeResult, RunResult, UnsupportedConstruct
from gangway.local.executor import LocalExecutor, workflow_from_template

__all__ = [
    "LocalExecutor",
    "NodeResult",
    "RunResult",
    "UnsupportedConstruct",
    "workflow_from_template",
]
