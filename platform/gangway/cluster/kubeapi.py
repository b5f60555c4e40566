"""A Kubernetes API client for a kube context, the one way Gangway reaches a cluster's API
(pods and their logs, CRDs, snapshots); a missing or broken kube config is one clear error."""

from __future__ import annotations

from typing import Any

from gangway.errors import PermanentError

__all__ = ["api_client"]


def api_client(context: str | None) -> Any:
    """A ``kubernetes.client.ApiClient`` for kube ``context`` (None: the current one)."""
    from kubernetes import config

    try:
        return config.new_client_from_config(context=context)  # type: ignore[no-untyped-call]
    except Exception as e:
        raise PermanentError(
            f"cannot load kube context {context or '(current)'}: {e}; check KUBECONFIG"
        ) from None
