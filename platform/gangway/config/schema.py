"""The platform config as typed data: clusters, orgs and teams with their quotas, priority
classes, storage, MLflow and the allowed image registries.

Field-level mistakes (a wrong type, an unknown key, a negative weight) are pydantic's; what
needs the whole document (a quota over its parent's, an unknown priority class) is checked by
:func:`gangway.config.checks.problems`. Both are reported at once, each with its field path.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gangway.config.alerts import Alerts, NightlyEval, Thresholds
from gangway.config.provisioning import Disruption, GpuPool, NodeClass, NodeShape, Provisioning
from gangway.units import quantity, quota_of, resource_list

__all__ = [
    "Alerts",
    "Cluster",
    "Disruption",
    "GpuPool",
    "HyperNodeSpec",
    "Mlflow",
    "NightlyEval",
    "NodeClass",
    "NodeShape",
    "Org",
    "PlatformConfig",
    "PriorityClass",
    "Provisioning",
    "Quota",
    "Resources",
    "Storage",
    "Team",
    "TeamView",
    "Thresholds",
    "Topology",
]

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A Kubernetes object name (DNS-1123 label): queues, namespaces, priority classes, clusters."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(_Model):
    """An amount of CPU, memory and GPUs (per GPU type, e.g. ``{H100: 8}``)."""

    cpu: str | int | None = None
    memory: str | None = None
    gpu: dict[str, int] = Field(default_factory=dict)

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str | int | None) -> str | int | None:
        if v is not None:
            try:
                if quantity(v) < 0:
                    raise ValueError("must not be negative")
            except ValueError as e:
                raise ValueError(f"{v!r} is not a Kubernetes quantity ({e})") from None
        return v

    @field_validator("gpu")
    @classmethod
    def _gpus(cls, v: dict[str, int]) -> dict[str, int]:
        return _gpu_counts(v)

    def amounts(self) -> dict[str, Decimal]:
        """Each resource set, as a number: ``cpu``, ``memory``, ``gpu:TYPE``."""
        out = {k: quantity(v) for k, v in (("cpu", self.cpu), ("memory", self.memory)) if v}
        out.update({f"gpu:{t}": Decimal(n) for t, n in self.gpu.items()})
        return out

    def resource_list(self) -> dict[str, str]:
        """As a Kubernetes ResourceList: GPUs of every type add up to ``nvidia.com/gpu``."""
        return resource_list(self.cpu, self.memory, self.gpu)

    def quota(self) -> dict[str, Any]:
        """As quota keys (:func:`gangway.units.quota_of`)."""
        return quota_of(self.cpu, self.memory, self.gpu)


def _gpu_counts(v: dict[str, int]) -> dict[str, int]:
    bad = [k for k, n in v.items() if not 0 <= n <= MAX_GPUS]
    if bad:
        raise ValueError(f"GPU counts must be between 0 and {MAX_GPUS}: {', '.join(bad)}")
    return v


MAX_GPUS = 1_000_000
"""More GPUs than any cluster has; keeps every count a 64-bit integer in CEL."""


class Quota(_Model):
    """What a queue is guaranteed (reserved), deserves (its share when the cluster is busy,
    reclaimable by others) and can at most use."""

    weight: int = Field(1, ge=1, le=65535)
    guarantee: Resources = Field(default_factory=Resources)
    deserved: Resources = Field(default_factory=Resources)
    capability: Resources | None = None
    reclaimable: bool = True
    """Whether other queues may reclaim what it uses beyond its deserved share."""


class Team(Quota):
    """A team: a leaf queue, a namespace, the priority classes it may use, and how many of
    its workflows may run at once."""

    queue: str | None = Field(None, pattern=NAME)
    """The Volcano queue (default: the team's name)."""
    namespace: str | None = Field(None, pattern=NAME)
    """Where its workflows run (default: ``team-NAME``)."""
    priority_classes: list[str] = Field(default_factory=list)
    """Allowed priority classes (default: the platform's default class only)."""
    max_workflows: int = Field(10, ge=1)
    """At most this many of its workflows run at once (an Argo semaphore)."""

    def queue_of(self, name: str) -> str:
        """The queue of the team called ``name``."""
        return self.queue or name

    def namespace_of(self, name: str) -> str:
        """The namespace of the team called ``name``."""
        return self.namespace or f"team-{name}"


class Org(Quota):
    """An organisation: a parent queue over its teams."""

    queue: str | None = Field(None, pattern=NAME)
    teams: dict[str, Team]


class PriorityClass(_Model):
    value: int = Field(ge=-2_147_483_648, le=1_000_000_000)
    preemptible: bool = True
    """False renders ``preemptionPolicy: Never``: pods of this class wait for room instead of
    preempting others (Kubernetes' non-preempting class). It does not protect them from being
    preempted (see :mod:`gangway.scheduling.preemption`)."""
    description: str = ""


class HyperNodeSpec(_Model):
    """An explicit topology domain: a tier (1 = closest, e.g. one NVLink/leaf switch) and its
    members — node names at tier 1, lower-tier HyperNodes above."""

    tier: int = Field(ge=1)
    members: list[str] = Field(min_length=1)


class Topology(_Model):
    """How a cluster's nodes are grouped, closest first: node labels per tier (Volcano
    discovers HyperNodes from them) or explicit HyperNodes."""

    labels: dict[str, str] = Field(default_factory=dict)
    """Tier name → node label, e.g. ``{rack: topology.gangway.dev/rack, block: …}``."""
    hypernodes: dict[str, HyperNodeSpec] = Field(default_factory=dict)


class Cluster(_Model):
    region: str
    kube_context: str
    argo_server: str
    argo_ui: str | None = None
    namespace: str = Field("argo", pattern=NAME)
    """Where Argo runs (its controller's ConfigMap lives here)."""
    token_env: str | None = None
    """The environment variable holding the Argo server token."""
    insecure_skip_verify: bool = False
    mlflow_url: str | None = None
    """The MLflow UI as users reach it from this cluster (default: ``mlflow.ui_url``)."""
    prometheus_url: str | None = None
    """The Prometheus HTTP API that scrapes this cluster's Gangway pods, as users reach it
    (``gangway status`` reads training progress from it; ``gangway usage --prometheus``)."""
    dashboard_url: str | None = None
    """The metrics dashboard of one workflow, linked from the Argo UI beside MLflow: a URL in
    which ``${workflow.metadata.name}`` (and any of Argo's link variables) is filled in, e.g.
    ``https://grafana.example.com/d/gangway-run?var-workflow=${workflow.metadata.name}``."""
    gpus: dict[str, int] = Field(default_factory=dict)
    """GPU type → how many the cluster has."""

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: dict[str, int]) -> dict[str, int]:
        return _gpu_counts(v)

    gpu_products: dict[str, str] = Field(default_factory=dict)
    """GPU type → its ``nvidia.com/gpu.product`` node label value (default: the type)."""
    topology: Topology = Field(default_factory=Topology)
    provisioning: Provisioning | None = None
    """GPU nodes launched by Karpenter (:mod:`gangway.config.provisioning`)."""


class Storage(_Model):
    buckets: dict[str, str] = Field(min_length=1)
    """Region → artifact bucket URI (``s3://…``)."""
    credentials_secret: str = "gangway-s3"
    """The Secret (in each team namespace and Argo's) with ``accessKey``/``secretKey``."""


class Mlflow(_Model):
    tracking_uri: str
    """As steps reach it, inside the cluster: ``http://SERVICE.NAMESPACE.svc:PORT`` names the
    Service the tracking server gets."""
    ui_url: str | None = None
    artifacts: str
    """Where the tracking server stores artifacts (``s3://…``)."""
    database_secret: str = "mlflow-db"
    """The Secret whose ``uri`` key is the Postgres URI of the backend store."""
    image: str = "ghcr.io/mlflow/mlflow:v3.1.1"

    @field_validator("tracking_uri")
    @classmethod
    def _service_uri(cls, v: str) -> str:
        try:
            url = urlparse(v)
            url.port  # noqa: B018 - raises on a port out of range
        except ValueError as e:
            raise ValueError(f"{v!r}: {e}") from None
        parts = (url.hostname or "").split(".")
        if url.scheme != "http" or len(parts) < 3 or parts[2] != "svc":
            raise ValueError(
                f"{v!r}: expected http://SERVICE.NAMESPACE.svc[:PORT], the in-cluster address "
                "of the tracking server"
            )
        return v

    @property
    def service(self) -> tuple[str, str, int]:
        """The tracking server's Service: name, namespace, port."""
        url = urlparse(self.tracking_uri)
        name, namespace = (url.hostname or "").split(".")[:2]
        return name, namespace, url.port or 80


class TeamView(_Model):
    """A team with every default resolved: what the renderers and the pipeline use."""

    name: str
    org: str | None
    queue: str
    parent_queue: str
    namespace: str
    service_account: str
    priority_classes: list[str]
    max_workflows: int
    quota: Quota


def _default_first(allowed: list[str], default: str) -> list[str]:
    """A team's classes with the platform's default first when the team may use it (its
    pipelines' default), else in the order listed."""
    return [default, *(c for c in allowed if c != default)] if default in allowed else allowed


class PlatformConfig(_Model):
    image: str
    """The runtime image steps run in."""
    registries: list[str] = Field(min_length=1)
    """Images may come only from these prefixes (``ghcr.io/gangway/``)."""
    argo_executor_image: str | None = None
    """Argo's executor (init and wait containers of every step), mirrored into an allowed
    registry (default: the first registry's ``argoexec:v4.1.2``)."""
    mlflow: Mlflow
    storage: Storage
    priority_classes: dict[str, PriorityClass] = Field(min_length=1)
    default_priority_class: str
    clusters: dict[str, Cluster] = Field(min_length=1)
    orgs: dict[str, Org] = Field(default_factory=dict)
    teams: dict[str, Team] = Field(default_factory=dict)
    """Teams outside any org (their queue's parent is Volcano's root queue)."""
    alerts: Alerts = Field(default_factory=Alerts)
    """Thresholds of the alerting rules (:mod:`gangway.config.alerts`)."""

    def team_entries(self) -> list[tuple[str, str | None, str, Team]]:
        """``(field path, org or None, name, team)`` of every team as written, org teams
        first — a team defined twice appears twice."""
        rows: list[tuple[str, str | None, str, Team]] = [
            (f"orgs.{o}.teams.{n}", o, n, t)
            for o, org in self.orgs.items()
            for n, t in org.teams.items()
        ]
        return [*rows, *((f"teams.{n}", None, n, t) for n, t in self.teams.items())]

    def team_views(self) -> dict[str, TeamView]:
        """Every team, org teams first, with defaults resolved."""
        return {
            name: TeamView(
                name=name,
                org=org,
                queue=team.queue_of(name),
                parent_queue=self.org_queue(org) if org else "root",
                namespace=team.namespace_of(name),
                service_account="gangway-runner",
                priority_classes=_default_first(
                    team.priority_classes or [self.default_priority_class],
                    self.default_priority_class,
                ),
                max_workflows=team.max_workflows,
                quota=team,
            )
            for _path, org, name, team in self.team_entries()
        }

    def org_queue(self, org: str) -> str:
        return self.orgs[org].queue or org

    @property
    def executor_image(self) -> str:
        return self.argo_executor_image or f"{self.registries[0]}argoexec:v4.1.2"

    def gpu_types(self) -> set[str]:
        return {t for c in self.clusters.values() for t in c.gpus}

    def granted_gpus(self) -> dict[str, int]:
        """GPU type → what the quotas grant on it on a cluster (every cluster has every
        queue): the sum over teams of each one's deserved share (its guarantee where that is
        larger)."""
        out: dict[str, int] = {}
        for _path, _org, _name, team in self.team_entries():
            for t in {*team.guarantee.gpu, *team.deserved.gpu}:
                mine = max(team.guarantee.gpu.get(t, 0), team.deserved.gpu.get(t, 0))
                out[t] = out.get(t, 0) + mine
        return out
