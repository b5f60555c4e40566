"""Reading a workflow's pod logs through the kubernetes client (the thin I/O layer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gangway.contract import STEP_LABEL, WORKFLOW_LABEL
from gangway.errors import PermanentError, TransientError

__all__ = ["read_logs", "select_pods"]


def select_pods(pods: list[dict[str, Any]], step: str | None) -> list[str]:
    """Pod names to show, oldest first; ``step`` matches Argo's template annotation or the
    gang pods' ``gangway.dev/step`` label."""
    chosen = []
    for p in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
        meta = p["metadata"]
        template = (meta.get("annotations") or {}).get("workflows.argoproj.io/node-name", "")
        if (
            step is None
            or (meta.get("labels") or {}).get(STEP_LABEL) == step
            or (template.endswith(f".{step}") or f".{step}(" in template)
        ):
            chosen.append(meta["name"])
    return chosen


def read_logs(
    workflow: str, namespace: str, context: str | None, step: str | None
) -> Iterator[tuple[str, str]]:
    from kubernetes import client

    from gangway.cluster.kubeapi import api_client

    api = client.CoreV1Api(api_client(context))
    try:
        listed = api.list_namespaced_pod(namespace, label_selector=f"{WORKFLOW_LABEL}={workflow}")
    except Exception as e:
        raise TransientError(f"cannot list pods of {workflow}: {e}") from e
    pods = [api.api_client.sanitize_for_serialization(p) for p in listed.items]
    names = select_pods(pods, step)
    if not names:
        raise PermanentError(
            f"no pods for workflow {workflow}"
            + (f" step {step}" if step else "")
            + f" in {namespace} (pods may have been garbage-collected)"
        )
    for name in names:
        yield name, api.read_namespaced_pod_log(name, namespace)
