"""A thin platform layer over Hera: a WorkflowTemplate and step templates with Gangway's
defaults. Pipelines stay plain Hera — ``with`` blocks, ``DAG``, ``>>``, ``with_param`` — and
call these factories instead of constructing ``WorkflowTemplate``/``Container``/``Resource``
by hand:

* :func:`pipeline` — labels and annotations (team, queue, pipeline; Argo UI title and
  description), pod GC and TTL, service account, a Pod Security "restricted" pod context, the
  ``image`` and ``storage-root`` parameters every step uses;
* :func:`step` — a container step running ``python -m MODULE`` with requests, a restricted
  container security context, a scratch volume at ``/gangway`` and the retry rules of its kind;
* :func:`gang_step` — an Argo ``resource`` template that creates a Volcano Job (see
  :mod:`gangway.volcano`) whose pods run the module under ``torchrun``, one per pod.

(:func:`step` and :func:`gang_step` are built in :mod:`gangway.workflows.templates`; this is
where a pipeline imports them.) Inside the ``with`` block of :func:`pipeline`, calling a step
(:mod:`gangway.wiring`) adds a typed task to it.

Paths under ``/gangway/`` are per-step scratch space; output parameters are read from
``/gangway/out/NAME``. The local executor maps ``/gangway/`` to a directory per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from dataclasses import dataclass
from typing import Any

from hera.workflows import Parameter, WorkflowTemplate
from hera.workflows import models as m
from pydantic import PrivateAttr

from gangway.config import PlatformConfig
from gangway.contract import (
    OUT_DIR,
    PIPELINE_LABEL,
    PRIORITY_CLASS_PARAM,
    QUEUE_LABEL,
    SCRATCH,
    SEMAPHORE_CONFIGMAP,
    TEAM_LABEL,
)
from gangway.errors import PermanentError
from gangway.params import SCHEMA_ANNOTATION, PipelineParams, argo_parameters, schema_json
from gangway.step.interface import TASK_MAKER, TaskMaker
from gangway.wiring import make_task
from gangway.workflows.templates import SERVICE_ACCOUNT, gang_step, pod_security, step

__all__ = [
    "OUT_DIR",
    "SCRATCH",
    "Defaults",
    "PipelineTemplate",
    "gang_step",
    "pipeline",
    "step",
]

EXIT_HANDLER = "lineage-exit"
"""Every pipeline's ``onExit`` template: :mod:`gangway.lineage.close` sends the workflow's
spooled lineage to MLflow and closes its parent run, so lineage is complete when it ends."""


class PipelineTemplate(WorkflowTemplate):
    """Hera's WorkflowTemplate; inside its ``with`` block, calling a step
    (:class:`~gangway.step.interface.StepSpec`) makes a task of this pipeline
    (:func:`gangway.wiring.make_task`)."""

    _task_token: Token[TaskMaker | None] | None = PrivateAttr(None)

    def __enter__(self) -> PipelineTemplate:
        entered = super().__enter__()
        self._task_token = TASK_MAKER.set(make_task)
        return entered

    def __exit__(self, *exc: Any) -> None:
        if self._task_token is not None:
            TASK_MAKER.reset(self._task_token)
            self._task_token = None
        super().__exit__(*exc)


@dataclass(frozen=True)
class Defaults:
    """What a team's pipelines get unless they say otherwise: the platform config's image,
    storage root (the bucket of the first cluster's region), MLflow, and the team's queue,
    first allowed priority class and semaphore (:meth:`for_team`)."""

    image: str
    storage_root: str
    mlflow_tracking_uri: str
    queue: str
    priority_class: str
    semaphore: str
    """The key of the team's entry in :data:`~gangway.contract.SEMAPHORE_CONFIGMAP`."""
    service_account: str = SERVICE_ACCOUNT
    ttl_seconds: int = 7 * 24 * 3600

    @classmethod
    def for_team(cls, team: str, config: PlatformConfig | None = None) -> Defaults:
        """The defaults of ``team`` in ``config`` (default: :func:`gangway.config.load_config`)."""
        from gangway.config import config_path, load_config

        cfg = config or load_config()
        views = cfg.team_views()
        if team not in views:
            where = "the given config" if config else str(config_path())
            raise PermanentError(
                f"team {team!r} is not in the platform config ({where}); teams: {', '.join(views)}"
            )
        view = views[team]
        region = next(iter(cfg.clusters.values())).region
        return cls(
            image=cfg.image,
            storage_root=cfg.storage.buckets[region],
            mlflow_tracking_uri=cfg.mlflow.tracking_uri,
            queue=view.queue,
            priority_class=view.priority_classes[0],
            semaphore=view.name,
            service_account=view.service_account,
        )


def _arguments(
    defaults: Defaults, parameters: Mapping[str, str | int] | type[PipelineParams]
) -> list[Parameter]:
    """The workflow parameters: the platform's, then the pipeline's (typed or not)."""
    if isinstance(parameters, type) and not issubclass(parameters, PipelineParams):
        raise PermanentError(
            f"parameters={parameters.__name__}: give a gangway.params.PipelineParams subclass "
            "(or a mapping of defaults)"
        )
    declared = argo_parameters(parameters) if isinstance(parameters, type) else []
    params = {
        "image": defaults.image,
        "storage-root": defaults.storage_root,
        "mlflow-tracking-uri": defaults.mlflow_tracking_uri,
        PRIORITY_CLASS_PARAM: defaults.priority_class,
        # Filled in by `gangway submit` / `gangway run`; recorded on the MLflow parent run.
        "cluster": "",
        "git-sha": "",
        **({} if isinstance(parameters, type) else parameters),
    }
    clash = sorted({p["name"] for p in declared} & set(params))
    if clash:
        raise PermanentError(
            f"parameter {clash[0]!r} is the platform's (it sets it for every pipeline); "
            "give yours another name"
        )
    arguments = [Parameter(name=k, value=str(v)) for k, v in params.items()]
    return arguments + [Parameter(**p) for p in declared]


def pipeline(
    name: str,
    *,
    team: str,
    title: str,
    description: str,
    parameters: Mapping[str, str | int] | type[PipelineParams],
    queue: str | None = None,
    defaults: Defaults | None = None,
) -> PipelineTemplate:
    """A WorkflowTemplate with Gangway's defaults; use it as a ``with`` block like Hera's.

    ``team`` is a team of the platform config: its queue, priority class and semaphore (at
    most ``max_workflows`` of its workflows run at once) come from there, as do the image,
    storage root and MLflow (``defaults`` overrides them all). ``parameters`` become workflow
    parameters (overridable with ``-p name=value``): a :class:`~gangway.params.PipelineParams`
    model (typed: enum and description in the Argo UI, ``-p`` values checked before anything
    runs) or a plain mapping of defaults. ``image``, ``storage-root``, ``mlflow-tracking-uri``,
    ``priority-class``, ``cluster`` and ``git-sha`` are always present.
    """
    defaults = defaults or Defaults.for_team(team)
    arguments = _arguments(defaults, parameters)
    annotations = {
        "workflows.argoproj.io/title": title,
        "workflows.argoproj.io/description": description,
    }
    if isinstance(parameters, type):
        annotations[SCHEMA_ANNOTATION] = schema_json(parameters)
    labels = {
        TEAM_LABEL: team,
        QUEUE_LABEL: queue or defaults.queue,
        PIPELINE_LABEL: name,
    }
    exit_handler = step(
        EXIT_HANDLER,
        module="gangway.lineage.close",
        args=["{{workflow.status}}"],
        requests={"cpu": "250m", "memory": "512Mi"},
    )
    return PipelineTemplate(
        kind="WorkflowTemplate",  # Hera names the kind after the class
        name=name,
        entrypoint="main",
        on_exit=EXIT_HANDLER,
        templates=[exit_handler],
        labels=labels,
        annotations=annotations,
        workflow_metadata=m.WorkflowMetadata(labels=labels),
        arguments=arguments,
        service_account_name=defaults.service_account,
        security_context=pod_security(),
        pod_gc=m.PodGC(strategy="OnPodSuccess"),
        ttl_strategy=m.TTLStrategy(
            seconds_after_success=defaults.ttl_seconds,
            seconds_after_failure=2 * defaults.ttl_seconds,
        ),
        pod_metadata=m.Metadata(labels=labels),
        synchronization=m.Synchronization(
            semaphores=[
                m.SemaphoreRef(
                    config_map_key_ref=m.ConfigMapKeySelector(
                        name=SEMAPHORE_CONFIGMAP, key=defaults.semaphore
                    )
                )
            ]
        ),
    )
