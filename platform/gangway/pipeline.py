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

Paths under ``/gangway/`` are per-step scratch space; output parameters are read from
``/gangway/out/NAME``. The local executor maps ``/gangway/`` to a directory per step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hera.workflows import Container, EmptyDirVolume, Parameter, Resource, WorkflowTemplate
from hera.workflows import models as m

from gangway.contract import (
    OUT_DIR,
    PIPELINE_LABEL,
    QUEUE_LABEL,
    SCRATCH,
    STEP_LABEL,
    TEAM_LABEL,
    WORKFLOW_LABEL,
    step_env,
)
from gangway.errors import PermanentError
from gangway.retries import StepKind, retry_strategy
from gangway.volcano.job import FAILURE_CONDITION, JOB_OUTPUTS, SUCCESS_CONDITION, pytorch_job

__all__ = [
    "OUT_DIR",
    "SCRATCH",
    "Defaults",
    "gang_step",
    "pipeline",
    "step",
]

RUN_URL_OUTPUT = "mlflow_run_url"


@dataclass(frozen=True)
class Defaults:
    """Platform defaults applied to every pipeline (from the platform config, later)."""

    image: str = "ghcr.io/gangway/runtime:latest"
    storage_root: str = "s3://gangway-artifacts"
    mlflow_tracking_uri: str = "http://mlflow.mlflow.svc:5000"
    service_account: str = "gangway-runner"
    queue: str = "default"
    priority_class: str = "gangway-normal"
    ttl_seconds: int = 7 * 24 * 3600
    run_as_user: int = 1000
    requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": "1", "memory": "2Gi"})


DEFAULTS = Defaults()


def _pod_security(d: Defaults) -> m.PodSecurityContext:
    return m.PodSecurityContext(
        run_as_non_root=True,
        run_as_user=d.run_as_user,
        run_as_group=d.run_as_user,
        fs_group=d.run_as_user,
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
    )


def _container_security() -> m.SecurityContext:
    return m.SecurityContext(
        allow_privilege_escalation=False,
        capabilities=m.Capabilities(drop=["ALL"]),
        run_as_non_root=True,
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
    )


def pipeline(
    name: str,
    *,
    team: str,
    title: str,
    description: str,
    parameters: Mapping[str, str | int],
    queue: str | None = None,
    defaults: Defaults = DEFAULTS,
) -> WorkflowTemplate:
    """A WorkflowTemplate with Gangway's defaults; use it as a ``with`` block like Hera's.

    ``parameters`` become workflow parameters (overridable with ``-p name=value``); ``image``
    ``storage-root``, ``mlflow-tracking-uri``, ``cluster`` and ``git-sha`` are always present.
    """
    params = {
        "image": defaults.image,
        "storage-root": defaults.storage_root,
        "mlflow-tracking-uri": defaults.mlflow_tracking_uri,
        # Filled in by `gangway submit` / `gangway run`; recorded on the MLflow parent run.
        "cluster": "",
        "git-sha": "",
        **parameters,
    }
    labels = {
        TEAM_LABEL: team,
        QUEUE_LABEL: queue or defaults.queue,
        PIPELINE_LABEL: name,
    }
    return WorkflowTemplate(
        name=name,
        entrypoint="main",
        labels=labels,
        annotations={
            "workflows.argoproj.io/title": title,
            "workflows.argoproj.io/description": description,
        },
        workflow_metadata=m.WorkflowMetadata(labels=labels),
        arguments=[Parameter(name=k, value=str(v)) for k, v in params.items()],
        service_account_name=defaults.service_account,
        security_context=_pod_security(defaults),
        pod_gc=m.PodGC(strategy="OnPodSuccess"),
        ttl_strategy=m.TTLStrategy(
            seconds_after_success=defaults.ttl_seconds,
            seconds_after_failure=2 * defaults.ttl_seconds,
        ),
        pod_metadata=m.Metadata(labels=labels),
    )


def _tracking_env(step_name: str, *, params: bool = True) -> list[m.EnvVar]:
    """What a step needs to record its lineage (:func:`gangway.contract.step_env`)."""
    return [m.EnvVar(name=k, value=v) for k, v in step_env(step_name, params=params)]


def _outputs(outputs: Sequence[str]) -> list[Parameter]:
    declared = [Parameter(name=o, value_from=m.ValueFrom(path=f"{OUT_DIR}/{o}")) for o in outputs]
    # Every step links to its MLflow run (empty when tracking is off).
    link = Parameter(
        name=RUN_URL_OUTPUT, value_from=m.ValueFrom(path=f"{OUT_DIR}/{RUN_URL_OUTPUT}", default="")
    )
    return [*declared, link]


def _check_module(step_name: str, module: str) -> None:
    """The module a step runs must be importable here, as it will be in the image: a typo is
    a compile error naming the step, not a failure minutes into a run."""
    import difflib
    import importlib.util
    import pkgutil

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return
    parent, _, _ = module.rpartition(".")
    known: list[str] = []
    try:
        spec = importlib.util.find_spec(parent) if parent else None
        where = spec.submodule_search_locations if spec else None
        known = [f"{parent}.{m.name}" for m in pkgutil.iter_modules(where)] if where else []
    except (ImportError, ValueError):
        pass
    close = difflib.get_close_matches(module, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "; check module= (python -m MODULE)"
    raise PermanentError(f"step {step_name!r}: module {module!r} cannot be imported{hint}")


def step(
    name: str,
    *,
    module: str,
    args: Sequence[str],
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    kind: StepKind = "io",
    requests: Mapping[str, str] | None = None,
    defaults: Defaults = DEFAULTS,
) -> Container:
    """A container step: ``python -m MODULE ARGS`` with the platform's defaults.

    ``inputs`` are the template's input parameters (use them in ``args`` as
    ``{{inputs.parameters.NAME}}``); each of ``outputs`` is read from ``/gangway/out/NAME``.
    """
    _check_module(name, module)
    req = dict(requests or defaults.requests)
    return Container(
        name=name,
        image="{{workflow.parameters.image}}",
        command=["python", "-m", module],
        args=list(args),
        env=_tracking_env(name),
        inputs=[Parameter(name=i) for i in inputs],
        outputs=_outputs(outputs),
        resources=m.ResourceRequirements(requests=req, limits={"memory": req["memory"]}),
        security_context=_container_security(),
        volumes=[EmptyDirVolume(name="scratch", mount_path=SCRATCH)],
        retry_strategy=retry_strategy(kind),
    )


def gang_step(
    name: str,
    *,
    module: str,
    args: Sequence[str],
    inputs: Sequence[str] = (),
    nodes: str = "{{inputs.parameters.nodes}}",
    procs_per_node: str = "{{inputs.parameters.procs-per-node}}",
    gpus_per_node: str = "{{inputs.parameters.gpus-per-node}}",
    queue: str | None = None,
    defaults: Defaults = DEFAULTS,
) -> Resource:
    """A gang-scheduled training step: an Argo resource template creating a Volcano Job.

    Each of ``nodes`` pods runs ``python -m gangway.step.launch`` (torchrun plus the exit-code
    contract) with c10d rendezvous at the MASTER_ADDR/MASTER_PORT that Volcano's pytorch plugin
    injects, ``procs_per_node`` processes per pod, and ``python -m MODULE ARGS`` in each.
    The Job's name is generated, so an Argo-level retry never collides with an earlier Job.
    """
    _check_module(name, module)
    launch = [
        "python",
        "-m",
        "gangway.step.launch",
        "--nnodes=$(WORLD_SIZE)",
        f"--nproc-per-node={procs_per_node}",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
        "--rdzv-id={{workflow.uid}}",
        "--max-restarts=0",
        "-m",
        module,
        *args,
    ]
    gpu_limits = {"nvidia.com/gpu": gpus_per_node}
    container = m.Container(
        name="trainer",
        image="{{workflow.parameters.image}}",
        command=launch[:3],
        args=launch[3:],
        env=_tracking_env(name, params=False),
        resources=m.ResourceRequirements(
            requests={**defaults.requests, **gpu_limits}, limits=gpu_limits
        ),
        security_context=_container_security(),
        volume_mounts=[
            m.VolumeMount(name="scratch", mount_path=SCRATCH),
            m.VolumeMount(name="dshm", mount_path="/dev/shm"),
        ],
    )
    job = pytorch_job(
        generate_name="{{workflow.name}}-" + name + "-",
        queue=queue or defaults.queue,
        nodes=nodes,
        container=container,
        pod_labels={WORKFLOW_LABEL: "{{workflow.name}}", STEP_LABEL: name},
        labels={WORKFLOW_LABEL: "{{workflow.name}}"},
        priority_class_name=defaults.priority_class,
        security_context=_pod_security(defaults),
        service_account_name=defaults.service_account,
        tolerations=[m.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        volumes=[
            m.Volume(name="scratch", empty_dir=m.EmptyDirVolumeSource()),
            m.Volume(name="dshm", empty_dir=m.EmptyDirVolumeSource(medium="Memory")),
        ],
    )
    return Resource(
        name=name,
        action="create",
        set_owner_reference=True,
        manifest=job.to_yaml(),
        success_condition=SUCCESS_CONDITION,
        failure_condition=FAILURE_CONDITION,
        inputs=[Parameter(name=i) for i in inputs],
        outputs=[
            Parameter(name=n, value_from=m.ValueFrom(json_path=p)) for n, p in JOB_OUTPUTS.items()
        ],
        retry_strategy=retry_strategy("gang"),
    )
