"""A Kubernetes API client for a kube context, the one way Gangway reaches a cluster's API
(pods and their logs, CRDs, snapshots); a missing or broken kube config is one clear error."""

from __future__ import annotations

import os
import re
from typing import Any

from gangway.errors import PermanentError

__all__ = ["api_client", "unreachable"]


def api_client(context: str | None) -> Any:
    """A ``kubernetes.client.ApiClient`` for kube ``context`` (None: the current one); inside
    a pod with no kube config (``gangway exporter`` on its cluster), the pod's service
    account."""
    from kubernetes import client, config

    try:
        return config.new_client_from_config(context=context)  # type: ignore[no-untyped-call]
    except Exception as e:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            settings = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=settings)  # type: ignore[no-untyped-call]
                return client.ApiClient(settings)
            except Exception:  # not a pod after all: the kube config's error says more
                pass
        raise PermanentError(
            f"cannot load kube context {context or '(current)'}: {e}; check KUBECONFIG"
        ) from None


def unreachable(context: str | None, api: Any, e: Exception) -> str:
    """Why the API server of ``context`` did not answer, in one line: its address and the
    cause in a few words (urllib3 nests it in a long, multi-line message)."""
    text = str(getattr(e, "reason", None) or e)
    found = re.search(r"\[Errno -?\d+\] [^\"')]+|certificate verify failed[^\"')]*", text)
    cause = found.group(0).strip() if found else " ".join(text.split())[:160]
    host = getattr(getattr(api, "configuration", None), "host", "") or ""
    at = f" {host}" if host else ""
    return f"context {context}: cannot reach the API server{at}: {cause}"
