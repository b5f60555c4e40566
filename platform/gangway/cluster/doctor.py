"""``gangway doctor``'s thin I/O: the cluster side rendered in-process as ``gangway manifests
render`` renders it, the live objects read through :mod:`gangway.cluster.kubeapi`, and the
comparison — a pure function — left to :func:`gangway.lint.drift.compare`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gangway.config import PlatformConfig
from gangway.errors import PermanentError, TransientError
from gangway.lint.drift import Drift, Rendered, compare, rendered_objects

__all__ = ["Reader", "doctor", "read_cluster"]

Reader = Callable[[str, Sequence[tuple[str, str, str]]], list[dict[str, Any]]]
"""Reads a cluster (its kube context; the (apiVersion, kind, namespace) the rendering holds):
its CRDs, its Deployments, and every object of those kinds there (as the API returns them)."""


def read_cluster(context: str, kinds: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """What :func:`gangway.lint.drift.compare` reads, from the cluster of kube ``context``: the
    CRDs (their schemas dropped), every Deployment (controller images say versions), and every
    object of each rendered (apiVersion, kind) in its namespace ("" for cluster-scoped ones).
    A kind the cluster does not serve is left out (its missing CRD is a finding)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

    from gangway.cluster.kubeapi import api_client, unreachable

    api = api_client(context)
    out: list[dict[str, Any]] = []

    def add(api_version: str, kind: str, items: list[Any]) -> None:
        for i in items:
            d = i if isinstance(i, dict) else api.sanitize_for_serialization(i)
            out.append({"apiVersion": api_version, "kind": kind, **d})

    try:
        crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        add("apiextensions.k8s.io/v1", "CustomResourceDefinition", [_slim(c, api) for c in crds])
        deployments = client.AppsV1Api(api).list_deployment_for_all_namespaces().items
        add("apps/v1", "Deployment", deployments)
        dynamic = DynamicClient(api)  # type: ignore[no-untyped-call]
        for api_version, kind, namespace in sorted(set(kinds)):
            if kind == "Deployment":
                continue  # listed above, every namespace
            try:
                resource = dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                continue
            listed = resource.get(namespace=namespace or None).to_dict()
            add(api_version, kind, listed.get("items") or [])
    except (ApiException, DynamicApiError) as e:
        status = getattr(e, "status", "")
        reason = getattr(e, "reason", "") or str(e).splitlines()[0]
        raise PermanentError(f"context {context}: the API refused: {status} {reason}") from None
    except PermanentError:
        raise
    except Exception as e:  # connection refused, DNS, TLS
        raise TransientError(unreachable(context, api, e)) from None
    return out


def _slim(crd: Any, api: Any) -> dict[str, Any]:
    """A CRD without its schemas (megabytes nobody compares here)."""
    d: dict[str, Any] = api.sanitize_for_serialization(crd)
    spec = d.get("spec") or {}
    spec["versions"] = [
        {k: v for k, v in ver.items() if k in ("name", "served", "storage")}
        for ver in spec.get("versions") or []
    ]
    return d


def doctor(
    cfg: PlatformConfig,
    cluster: str,
    *,
    reader: Reader | None = None,
    manifests: str = "manifests",
) -> Drift:
    """Cluster ``cluster`` of ``cfg`` against what ``gangway manifests render`` makes for it;
    the fixes apply files under ``manifests`` (where the rendering is written). ``reader``
    (default :func:`read_cluster`) reads the cluster."""
    from gangway.render import render

    c = cfg.clusters[cluster]
    rendered: list[Rendered] = rendered_objects(render(cfg), cluster)
    kinds = [
        (str(o["apiVersion"]), str(o["kind"]), str((o.get("metadata") or {}).get("namespace", "")))
        for _, o in rendered
    ]
    live = (reader or read_cluster)(c.kube_context, kinds)
    return compare(
        rendered,
        live,
        cluster=cluster,
        context=c.kube_context,
        namespace=c.namespace,
        manifests=manifests.rstrip("/"),
    )
