"""Building a Volcano Job: typed objects, serialised with :meth:`VolcanoJob.to_manifest`,
and the API's constants (version, kind, phases, defaults)."""

from __future__ import annotations

import re
from typing import Any, Literal

import yaml
from hera.workflows.models import (
    Container,
    PodSecurityContext,
    Toleration,
    Volume,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ABORTED",
    "ABORT_JOB",
    "COMPLETED",
    "COMPLETE_JOB",
    "DEFAULT_MAX_RETRY",
    "FAILED",
    "FAILED_PHASES",
    "FAILURE_CONDITION",
    "JOB_API_GROUP",
    "JOB_API_VERSION",
    "JOB_KIND",
    "JOB_OUTPUTS",
    "JOB_RESOURCE",
    "POD_EVICTED",
    "RESTART_JOB",
    "SUCCESS_CONDITION",
    "TERMINATED",
    "LifecyclePolicy",
    "PodSpec",
    "PodTemplate",
    "VolcanoJob",
    "VolcanoTask",
    "pytorch_job",
    "unquote_counts",
]

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_API_GROUP = JOB_API_VERSION.split("/")[0]
JOB_KIND = "Job"
JOB_RESOURCE = "jobs"
"""The Job's resource name, for RBAC rules and admission resource rules."""
PYTORCH_PORT = 23456
DEFAULT_MAX_RETRY = 3
"""Volcano's default ``maxRetry``: whole-gang restarts before the Job fails."""
COMPLETED = "Completed"
FAILED = "Failed"
ABORTED = "Aborted"
TERMINATED = "Terminated"
FAILED_PHASES = (FAILED, ABORTED, TERMINATED)
"""The terminal phases of a Job that did not complete."""
SUCCESS_CONDITION = f"status.state.phase == {COMPLETED}"
FAILURE_CONDITION = f"status.state.phase in ({','.join(FAILED_PHASES)})"
"""The Argo resource-template conditions that end a step creating a Job."""
JOB_OUTPUTS = {
    "job-name": "{.metadata.name}",
    "job-phase": "{.status.state.phase}",
    "job-restarts": "{.status.retryCount}",
}
"""What a step reports from its Job once it finishes: output name → jsonPath."""
Event = Literal["PodEvicted", "PodFailed", "PodPending", "TaskCompleted", "JobUnknown", "*"]
Action = Literal["RestartJob", "AbortJob", "CompleteJob", "TerminateJob", "RestartTask"]
POD_EVICTED: Event = "PodEvicted"
RESTART_JOB: Action = "RestartJob"
ABORT_JOB: Action = "AbortJob"
COMPLETE_JOB: Action = "CompleteJob"
_COUNT_FIELD = re.compile(r"^(\s*(?:-\s+)?(?:minAvailable|replicas): )'(\{\{.*\}\})'$", re.M)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        return out


class LifecyclePolicy(_Model):
    """What Volcano does on an event (e.g. PodEvicted → RestartJob: restart the whole gang)."""

    event: Event | None = None
    exit_code: int | None = Field(None, alias="exitCode")
    action: Action

    @model_validator(mode="after")
    def _one_trigger(self) -> LifecyclePolicy:
        if (self.event is None) == (self.exit_code is None):
            raise ValueError("a lifecycle policy needs exactly one of event or exitCode")
        return self


class PodSpec(_Model):
    """The subset of a Kubernetes PodSpec that Gangway sets on gang pods."""

    containers: list[Container]
    restart_policy: Literal["Never", "OnFailure"] = Field("Never", alias="restartPolicy")
    volumes: list[Volume] | None = None
    tolerations: list[Toleration] | None = None
    node_selector: dict[str, str] | None = Field(None, alias="nodeSelector")
    security_context: PodSecurityContext | None = Field(None, alias="securityContext")
    service_account_name: str | None = Field(None, alias="serviceAccountName")
    priority_class_name: str | None = Field(None, alias="priorityClassName")
    scheduler_name: str | None = Field(None, alias="schedulerName")
    termination_grace_period_seconds: int | None = Field(
        None, alias="terminationGracePeriodSeconds"
    )


class PodMeta(_Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] | None = None


class PodTemplate(_Model):
    metadata: PodMeta = Field(default_factory=PodMeta)
    spec: PodSpec


Count = int | str
"""A count, or an Argo placeholder (``{{inputs.parameters.nodes}}``) resolved at run time."""


def _check_count(v: Count, field: str) -> Count:
    if isinstance(v, str) and not (v.startswith("{{") and v.endswith("}}")):
        raise ValueError(f"{field} must be an integer or an Argo placeholder, got {v!r}")
    if isinstance(v, int) and v < 0:
        raise ValueError(f"{field} must be >= 0, got {v}")
    return v


class VolcanoTask(_Model):
    name: str
    replicas: Count
    template: PodTemplate
    policies: list[LifecyclePolicy] | None = None

    @model_validator(mode="after")
    def _count(self) -> VolcanoTask:
        _check_count(self.replicas, f"tasks[{self.name}].replicas")
        return self


class VolcanoJob(_Model):
    """A Volcano Job: a gang of tasks admitted together (``minAvailable``) into a queue."""

    generate_name: str
    labels: dict[str, str] = Field(default_factory=dict)
    min_available: Count = Field(alias="minAvailable")
    scheduler_name: str = Field("volcano", alias="schedulerName")
    queue: str
    priority_class_name: str | None = Field(None, alias="priorityClassName")
    max_retry: int = Field(DEFAULT_MAX_RETRY, alias="maxRetry", ge=0)
    plugins: dict[str, list[str]] = Field(default_factory=dict)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    tasks: list[VolcanoTask]

    @model_validator(mode="after")
    def _gang_is_whole(self) -> VolcanoJob:
        _check_count(self.min_available, "minAvailable")
        counts = [t.replicas for t in self.tasks]
        if not all(isinstance(c, int) for c in [*counts, self.min_available]):
            return self  # placeholders: checked after substitution by `gangway lint`
        pods = sum(int(c) for c in counts)
        if self.min_available != pods:
            raise ValueError(
                f"minAvailable ({self.min_available}) must equal the pod count ({pods})"
            )
        return self

    def to_manifest(self) -> dict[str, Any]:
        """The Job as a Kubernetes object (camelCase keys, no empty fields)."""
        spec = self.dump()
        for k in ("generate_name", "labels"):
            spec.pop(k, None)
        return {
            "apiVersion": JOB_API_VERSION,
            "kind": JOB_KIND,
            "metadata": {"generateName": self.generate_name, "labels": dict(self.labels)},
            "spec": spec,
        }

    def to_yaml(self) -> str:
        """The manifest as YAML for an Argo resource template; count fields holding a
        placeholder are left unquoted so that they are integers once Argo substitutes them."""
        return unquote_counts(yaml.safe_dump(self.to_manifest(), sort_keys=False, width=1000))


def unquote_counts(text: str) -> str:
    """A Job's YAML with each count field holding a placeholder (``minAvailable``,
    ``replicas``) unquoted, so that it is an integer once Argo substitutes it."""
    return _COUNT_FIELD.sub(r"\1\2", text)


def pytorch_job(
    *,
    generate_name: str,
    queue: str,
    nodes: int | str,
    container: Container,
    pod_labels: dict[str, str],
    priority_class_name: str | None = None,
    max_retry: int = DEFAULT_MAX_RETRY,
    security_context: PodSecurityContext | None = None,
    service_account_name: str | None = None,
    tolerations: list[Toleration] | None = None,
    node_selector: dict[str, str] | None = None,
    volumes: list[Volume] | None = None,
    labels: dict[str, str] | None = None,
    grace_seconds: int | None = None,
    pod_annotations: dict[str, str] | None = None,
) -> VolcanoJob:
    """A gang of ``nodes`` pods: task ``master`` (1) + ``worker`` (nodes-1), pytorch/svc/env
    plugins (MASTER_ADDR/PORT, WORLD_SIZE, RANK injected), whole-gang restart on eviction or
    pod failure bounded by ``max_retry``, and completion when the master completes.

    ``nodes`` may be an Argo placeholder (``{{inputs.parameters.nodes}}``); the worker count
    is then an Argo expression evaluated at run time. ``grace_seconds`` is how long a pod has
    between SIGTERM and SIGKILL (to save a checkpoint). ``pod_annotations`` go on every pod.
    """
    if isinstance(nodes, int):
        workers: Count = nodes - 1
    else:
        inner = nodes.strip("{} ")
        workers = f"{{{{=asInt({inner}) - 1}}}}"
    spec = PodSpec(
        containers=[container],
        volumes=volumes,
        tolerations=tolerations,
        node_selector=node_selector,
        security_context=security_context,
        service_account_name=service_account_name,
        termination_grace_period_seconds=grace_seconds,
    )
    template = PodTemplate(
        metadata=PodMeta(labels=pod_labels, annotations=pod_annotations or None), spec=spec
    )
    return VolcanoJob(
        generate_name=generate_name,
        labels=labels or {},
        min_available=nodes,
        queue=queue,
        priority_class_name=priority_class_name,
        max_retry=max_retry,
        plugins={
            "pytorch": ["--master=master", "--worker=worker", f"--port={PYTORCH_PORT}"],
            "svc": [],
            "env": [],
        },
        policies=[
            # A permanent error (exit 1) cannot be fixed by restarting the gang.
            LifecyclePolicy(exit_code=1, action=ABORT_JOB),
            LifecyclePolicy(event=POD_EVICTED, action=RESTART_JOB),
            LifecyclePolicy(event="PodFailed", action=RESTART_JOB),
        ],
        tasks=[
            VolcanoTask(
                name="master",
                replicas=1,
                template=template,
                policies=[LifecyclePolicy(event="TaskCompleted", action=COMPLETE_JOB)],
            ),
            VolcanoTask(name="worker", replicas=workers, template=template),
        ],
    )
