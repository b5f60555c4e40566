"""Argo's names for a workflow's nodes and pods, and the variables Argo gives one node and one
attempt of it: ``node.name``, ``pod.name``, ``retries``, ``lastRetry.*``.

A node's full name starts with the workflow's: the entrypoint's node is ``WORKFLOW``, a DAG's
tasks below it ``WORKFLOW.task``, a steps template's ``WORKFLOW[0].step``, a retried leaf's
attempts ``NODE(0)``, ``NODE(1)``… A pod (v2 names, Argo's default) is
``WORKFLOW-TEMPLATE-HASH`` where HASH is the FNV-1a hash of the attempt's node name, and the
entrypoint's own pod is named ``WORKFLOW``.
"""

from __future__ import annotations

__all__ = [
    "argo_node_name",
    "go_float",
    "last_retry_scope",
    "pod_name",
]

_MAX_POD_PREFIX = 253 - 10 - 1
"""Kubernetes' name limit, less room for the hash and its dash."""


def argo_node_name(workflow: str, local: str) -> str:
    """The full node name Argo gives the node a local run names ``local`` (local names leave
    the workflow's name out: ``task``, ``[0].step``, ``""`` for the top; an exit handler's
    ``WORKFLOW.onExit`` already has it)."""
    if not local or local == workflow:
        return workflow
    if local.startswith((f"{workflow}.onExit", f"{workflow}.hooks.")):
        return local
    return f"{workflow}{local}" if local.startswith("[") else f"{workflow}.{local}"


def _fnv1a32(text: str) -> int:
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def pod_name(workflow: str, node: str, template: str) -> str:
    """Argo's v2 pod name of the attempt whose full node name is ``node``, running
    ``template`` (empty for an inline template)."""
    if node == workflow:
        return workflow
    prefix = f"{workflow}-{template}" if template else workflow
    return f"{prefix[:_MAX_POD_PREFIX]}-{_fnv1a32(node)}"


def go_float(value: float) -> str:
    """A number of seconds as Go's ``fmt.Sprint`` writes a float64 (``2``, ``0.5``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def last_retry_scope(
    status: str, exit_code: int | None, seconds: float, message: str, *, no_exit_code: str
) -> dict[str, str]:
    """``lastRetry.exitCode``, ``.status``, ``.duration`` (seconds, as Go writes them) and
    ``.message`` of the attempt that ended last. ``no_exit_code``: what an attempt without an
    exit code gives (Argo says ``-1`` in ``retryStrategy.expression``, ``0`` in a template's
    fields)."""
    return {
        "lastRetry.exitCode": no_exit_code if exit_code is None else str(exit_code),
        "lastRetry.status": status,
        "lastRetry.duration": go_float(seconds),
        "lastRetry.message": message,
    }
