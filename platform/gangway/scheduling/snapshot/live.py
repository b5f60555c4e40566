"""A snapshot of the platform config's live clusters, through the kubernetes client: the one
place admission and placement touch a cluster. It lists Nodes, Pods, PriorityClasses and
Volcano's Queues, PodGroups and HyperNodes of each cluster's kube context and hands them to
:func:`gangway.scheduling.snapshot.objects.cluster_from_objects`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gangway.config.schema import PlatformConfig
from gangway.errors import PermanentError, TransientError
from gangway.scheduling.snapshot.build import from_config
from gangway.scheduling.snapshot.checks import problems
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.scheduling.snapshot.objects import cluster_from_objects
from gangway.volcano.objects import LISTED_KINDS

__all__ = ["list_objects", "list_workflow_gangs", "live_snapshot"]


def list_objects(context: str | None) -> list[dict[str, Any]]:
    """Every object a snapshot needs from the cluster of kube ``context``, as plain dicts."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from gangway.cluster.kubeapi import api_client, unreachable

    api = api_client(context)
    core = client.CoreV1Api(api)
    out: list[dict[str, Any]] = []

    def add(kind: str, items: list[Any]) -> None:
        for i in items:
            d = api.sanitize_for_serialization(i) if not isinstance(i, dict) else i
            d.setdefault("kind", kind)
            out.append(d)

    try:
        add("Node", core.list_node().items)
        add(
            "Pod",
            core.list_pod_for_all_namespaces(
                field_selector="status.phase!=Succeeded,status.phase!=Failed"
            ).items,
        )
        add("PriorityClass", client.SchedulingV1Api(api).list_priority_class().items)
        custom = client.CustomObjectsApi(api)
        for group, version, plural, kind in LISTED_KINDS:
            try:
                listed = custom.list_cluster_custom_object(group, version, plural)
                add(kind, dict(listed)["items"])  # type: ignore[call-overload]
            except ApiException as e:
                if e.status != 404:  # HyperNodes are optional (label discovery may be off)
                    raise
    except ApiException as e:
        raise PermanentError(f"context {context}: the API refused: {e.status} {e.reason}") from None
    except Exception as e:  # connection refused, DNS, TLS
        raise TransientError(unreachable(context, api, e)) from None
    return out


def live_snapshot(
    cfg: PlatformConfig,
    *,
    clusters: list[str] | None = None,
    lister: Callable[[str | None], list[dict[str, Any]]] = list_objects,
    warn: Callable[[str], None] = lambda _m: None,
    hint: str | None = None,
) -> Snapshot:
    """A snapshot of ``clusters`` (default: all the config's), read with ``lister``. A cluster
    that cannot be reached is left out with a warning; none reachable is an error (``hint``
    says what to do instead). Queues keep the config's per-model quota keys, which a Volcano
    Queue cannot hold."""
    base = from_config(cfg, datetime.now(UTC)).build()
    states = {}
    for name in clusters or list(cfg.clusters):
        c = cfg.clusters[name]
        try:
            objs = lister(c.kube_context)
        except (PermanentError, TransientError) as e:
            warn(f"{name}: left out of the snapshot: {e}")
            continue
        states[name] = cluster_from_objects(
            objs,
            region=c.region,
            gpu_products=c.gpu_products,
            topology_labels=c.topology.labels,
            extra_quota={
                q: qs.model_dump(mode="json", include={"guarantee", "deserved", "capability"})
                for q, qs in base.clusters[name].queues.items()
            },
            classes=base.priority_classes,
        )
    if not states:
        hint = hint or (
            "pass --snapshot FILE (e.g. one `gangway snapshot save` wrote) to decide over a "
            "saved snapshot"
        )
        raise PermanentError(f"no cluster could be read; {hint}")
    starts = [g.started_at for c in states.values() for g in c.gangs if g.started_at]
    taken = max([base.taken_at, *starts])  # the API server's clock may run ahead of ours
    snap = base.model_copy(update={"clusters": states, "source": "live", "taken_at": taken})
    for problem in problems(snap):
        warn(f"inconsistent live state: {problem}")
    return snap


def list_workflow_gangs(
    context: str | None, namespace: str | None, workflow: str
) -> list[dict[str, Any]]:
    """The Volcano Jobs of ``workflow`` and the PodGroups, in ``namespace`` (None: every
    namespace)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from gangway.cluster.kubeapi import api_client, unreachable
    from gangway.contract import WORKFLOW_LABEL
    from gangway.volcano.job import JOB_API_GROUP, JOB_API_VERSION, JOB_KIND, JOB_RESOURCE
    from gangway.volcano.objects import LISTED_KINDS, PODGROUP_KIND

    api = api_client(context)
    custom = client.CustomObjectsApi(api)
    group = next(k for k in LISTED_KINDS if k[3] == PODGROUP_KIND)
    try:
        selector = f"{WORKFLOW_LABEL}={workflow}"
        version = JOB_API_VERSION.split("/")[1]
        if namespace:
            jobs = custom.list_namespaced_custom_object(
                JOB_API_GROUP, version, namespace, JOB_RESOURCE, label_selector=selector
            )
            groups = custom.list_namespaced_custom_object(group[0], group[1], namespace, group[2])
        else:
            jobs = custom.list_cluster_custom_object(
                JOB_API_GROUP, version, JOB_RESOURCE, label_selector=selector
            )
            groups = custom.list_cluster_custom_object(group[0], group[1], group[2])
    except ApiException as e:
        raise PermanentError(f"context {context}: the API refused: {e.status} {e.reason}") from None
    except Exception as e:
        raise TransientError(unreachable(context, api, e)) from None
    out = [{"kind": JOB_KIND, **j} for j in dict(jobs).get("items", [])]  # type: ignore[call-overload]
    return out + [{"kind": PODGROUP_KIND, **g} for g in dict(groups).get("items", [])]  # type: ignore[call-overload]
