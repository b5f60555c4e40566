"""A step's Argo template with the platform's defaults: :func:`step`, a container running
``python -m MODULE``, and :func:`gang_step`, a ``resource`` template creating a Volcano Job
whose pods run the module under ``torchrun``. Pipelines reach them as ``gangway.pipeline.step``
and ``gangway.pipeline.gang_step``; typed wiring (:mod:`gangway.wiring`) builds on them.

Paths under ``/gangway/`` are per-step scratch space; output parameters are read from
``/gangway/out/NAME``. The local executor maps ``/gangway/`` to a directory per step.
Every step's pods serve their metrics on the container port named ``metrics`` and carry the
labels a PodMonitor copies onto them (team, queue, pipeline, step); every step's template
carries Argo's custom metrics (:mod:`gangway.workflows.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hera.workflows import Container, EmptyDirVolume, Parameter, Resource
from hera.workflows import models as m

from gangway.argo.retries import StepKind, retry_strategy
from gangway.contract import (
    OUT_DIR,
    PIPELINE_LABEL,
    PRIORITY_CLASS_PARAM,
    QUEUE_LABEL,
    SCRATCH,
    STEP_LABEL,
    TEAM_LABEL,
    WORKFLOW_LABEL,
    step_env,
)
from gangway.step.caching import Cache
from gangway.units import DO_NOT_DISRUPT
from gangway.volcano.job import FAILURE_CONDITION, JOB_OUTPUTS, SUCCESS_CONDITION, pytorch_job
from gangway.workflows.gpu_pods import GpuPods, gpu_pods
from gangway.workflows.memoize import KEY_INPUT, RECORD_INPUT, memoized
from gangway.workflows.metrics import metrics_port, template_metrics
from gangway.workflows.step_modules import check_module

__all__ = [
    "GANG_GRACE_SECONDS",
    "REQUESTS",
    "RUN_URL_OUTPUT",
    "SERVICE_ACCOUNT",
    "gang_step",
    "pod_security",
    "step",
]

RUN_URL_OUTPUT = "mlflow_run_url"
SERVICE_ACCOUNT = "gangway-runner"
RUN_AS_USER = 1000
REQUESTS: Mapping[str, str] = {"cpu": "1", "memory": "2Gi"}
"""What a step's container requests unless it says otherwise."""
GANG_GRACE_SECONDS = 300
"""A gang pod's time between SIGTERM and SIGKILL: a gpu-preset checkpoint is 8.2 GB."""


def pod_security() -> m.PodSecurityContext:
    return m.PodSecurityContext(
        run_as_non_root=True,
        run_as_user=RUN_AS_USER,
        run_as_group=RUN_AS_USER,
        fs_group=RUN_AS_USER,
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
    )


def _container_security() -> m.SecurityContext:
    return m.SecurityContext(
        allow_privilege_escalation=False,
        capabilities=m.Capabilities(drop=["ALL"]),
        run_as_non_root=True,
        seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
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


def step(
    name: str,
    *,
    module: str,
    args: Sequence[str],
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    kind: StepKind = "io",
    requests: Mapping[str, str] | None = None,
    cache: Cache | None = None,
    gpus: int = 0,
    gpu_product: str | None = None,
) -> Container:
    """A container step: ``python -m MODULE ARGS`` with the platform's defaults.

    ``inputs`` are the template's input parameters (use them in ``args`` as
    ``{{inputs.parameters.NAME}}``); each of ``outputs`` is read from ``/gangway/out/NAME``.
    ``cache`` makes it cacheable: Argo's ``memoize`` on the key its cache-check task gives it
    (two more inputs, see :mod:`gangway.workflows.memoize`). ``gpus`` GPUs of ``gpu_product`` make
    it a GPU pod (:func:`gangway.workflows.gpu_pods.gpu_pods`).
    """
    check_module(name, module)
    req = dict(requests or REQUESTS)
    gpu = gpu_pods(gpus, gpu_product, where=f"step {name!r}")
    env = [*_tracking_env(name), *gpu.env]
    memo: dict[str, Any] = {}
    if cache is not None:
        memo["memoize"], cache_env = memoized(cache)
        env, inputs = [*env, *cache_env], [*inputs, KEY_INPUT, RECORD_INPUT]
    return Container(
        name=name,
        image="{{workflow.parameters.image}}",
        command=["python", "-m", module],
        args=list(args),
        env=env,
        inputs=[Parameter(name=i) for i in inputs],
        outputs=_outputs(outputs),
        resources=gpu.resources(req),
        ports=[metrics_port()],
        security_context=_container_security(),
        node_selector=gpu.node_selector,
        tolerations=gpu.tolerations,
        volumes=[EmptyDirVolume(name="scratch", mount_path=SCRATCH)],
        retry_strategy=retry_strategy(kind),
        metrics=template_metrics(name),
        labels={STEP_LABEL: name},
        **memo,
    )


def _trainer(
    step_name: str,
    module: str,
    args: Sequence[str],
    procs_per_node: str,
    gpu: GpuPods,
    requests: Mapping[str, str],
) -> m.Container:
    """A gang pod's container: ``python -m gangway.step.launch`` (torchrun and the exit-code
    contract) around ``python -m MODULE ARGS``, c10d rendezvous at what the pytorch plugin
    injects."""
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
        # On SIGTERM, the workers' time to agree, save a checkpoint and exit 143.
        f"--shutdown-timeout={GANG_GRACE_SECONDS - 30}",
        "-m",
        module,
        *args,
    ]
    container = m.Container(
        name="trainer",
        image="{{workflow.parameters.image}}",
        command=launch[:3],
        args=launch[3:],
        env=[*_tracking_env(step_name, params=False), *gpu.env],
        resources=gpu.resources(requests),
        ports=[metrics_port()],
        security_context=_container_security(),
        volume_mounts=[
            m.VolumeMount(name="scratch", mount_path=SCRATCH),
            m.VolumeMount(name="dshm", mount_path="/dev/shm"),
        ],
    )
    return container


def _gang_pod_labels(step_name: str) -> dict[str, str]:
    """A gang pod's labels: its workflow (its logs show in the Argo UI), its step, and the
    workflow's team, queue and pipeline, which the PodMonitor copies onto its metrics as Argo
    puts them on the pods it creates itself."""
    return {
        WORKFLOW_LABEL: "{{workflow.name}}",
        STEP_LABEL: step_name,
        **{k: "{{workflow.labels." + k + "}}" for k in (TEAM_LABEL, QUEUE_LABEL, PIPELINE_LABEL)},
    }


def gang_step(
    name: str,
    *,
    module: str,
    args: Sequence[str],
    inputs: Sequence[str] = (),
    nodes: str = "{{inputs.parameters.nodes}}",
    procs_per_node: str = "{{inputs.parameters.procs-per-node}}",
    gpus_per_node: str = "0",
    gpu_product: str | None = None,
    queue: str | None = None,
    requests: Mapping[str, str] | None = None,
) -> Resource:
    """A gang-scheduled training step: an Argo resource template creating a Volcano Job.

    The Job goes to the pipeline's queue (its ``gangway.dev/queue`` label, the team's) unless
    ``queue`` is given, with the run's ``priority-class`` parameter.

    Each of ``nodes`` pods runs ``python -m gangway.step.launch`` (torchrun plus the exit-code
    contract) with c10d rendezvous at the MASTER_ADDR/MASTER_PORT that Volcano's pytorch plugin
    injects, ``procs_per_node`` processes per pod, and ``python -m MODULE ARGS`` in each.
    The Job's name is generated, so an Argo-level retry never collides with an earlier Job.
    ``gpus_per_node`` GPUs of ``gpu_product`` per pod make it a GPU gang (its pods select the
    product and tolerate the GPU taint, :func:`gangway.workflows.gpu_pods.gpu_pods`); a CPU gang has
    neither. ``requests`` are each pod's CPU and memory. Its pods carry Karpenter's
    ``karpenter.sh/do-not-disrupt`` (:data:`gangway.units.DO_NOT_DISRUPT`): no consolidation or
    drift takes a node from under one rank of the gang (``docs/capacity.md``).
    """
    check_module(name, module)
    gpu = gpu_pods(gpus_per_node, gpu_product, where=f"gang step {name!r}")
    req = dict(requests or REQUESTS)
    container = _trainer(name, module, args, procs_per_node, gpu, req)
    job = pytorch_job(
        generate_name="{{workflow.name}}-" + name + "-",
        queue=queue or "{{workflow.labels." + QUEUE_LABEL + "}}",
        nodes=nodes,
        container=container,
        pod_labels=_gang_pod_labels(name),
        pod_annotations={DO_NOT_DISRUPT: "true"},
        labels={
            WORKFLOW_LABEL: "{{workflow.name}}",
            QUEUE_LABEL: "{{workflow.labels." + QUEUE_LABEL + "}}",
        },
        priority_class_name="{{workflow.parameters." + PRIORITY_CLASS_PARAM + "}}",
        security_context=pod_security(),
        service_account_name=SERVICE_ACCOUNT,
        grace_seconds=GANG_GRACE_SECONDS,
        tolerations=gpu.tolerations,
        node_selector=gpu.node_selector,
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
        metrics=template_metrics(name),
    )
