"""The step contract: what a step's container gets from the platform, and what it gives back.

One module, so the pipeline that writes these names (:mod:`gangway.pipeline`), the step code
that reads them (:mod:`gangway.step`, :mod:`gangway.step.tracking`), the local executor that fakes
the pod (:mod:`gangway.local`) and the tools that find a workflow's pods and runs
(:mod:`gangway.cluster.logs`, :mod:`gangway.lineage.links`, :mod:`gangway.lineage`) cannot drift
apart.

* **Files**: ``/gangway`` is per-step scratch space (an emptyDir; locally a directory per step
  attempt); output parameters are read from ``/gangway/out/NAME``.
* **Labels** on the workflow and its pods: ``gangway.dev/{team,queue,pipeline,step}``.
* **Environment**: the workflow's identity and parameters, the MLflow tracking URI, where to
  spool lineage and write outputs (:data:`STEP_ENV`).
* **Exit codes**: 0 success, 1 permanent, 75 transient, 143 preempted (SIGTERM, saved first);
  137 is a SIGKILL (OOM, lost node). :mod:`gangway.argo.retries` retries 75, 137 and 143.
* **MLflow**: every tag Gangway writes starts with ``gangway.`` (:func:`tag`); values are cut
  to MLflow's limits (:func:`param_value`, :func:`tag_value`).
"""

from __future__ import annotations

__all__ = [
    "ENV_EXIT_DIR",
    "ENV_GPUS",
    "ENV_GPU_MODEL",
    "ENV_LINEAGE_REPLAY",
    "ENV_LINEAGE_SPOOL",
    "ENV_LOCAL_RUN",
    "ENV_METRICS_DIR",
    "ENV_METRICS_PORT",
    "ENV_OUTPUTS",
    "ENV_PIPELINE",
    "ENV_QUEUE",
    "ENV_STEP",
    "ENV_SUBMITTED_MS",
    "ENV_TEAM",
    "ENV_TRACKING_URI",
    "ENV_WORKFLOW_PARAMS",
    "EXIT_KILLED",
    "EXIT_OK",
    "EXIT_PERMANENT",
    "EXIT_PREEMPTED",
    "EXIT_TRANSIENT",
    "EXPERIMENT_ANNOTATION",
    "HERA_OUTPUTS",
    "LABEL_PREFIX",
    "LINEAGE_SPOOL",
    "METRICS_PORT",
    "METRICS_PORT_NAME",
    "OUT_DIR",
    "PIPELINE_LABEL",
    "PRIORITY_CLASS_PARAM",
    "QUEUE_LABEL",
    "SCRATCH",
    "SEMAPHORE_CONFIGMAP",
    "STEP_ENV",
    "STEP_LABEL",
    "TAG_PREFIX",
    "TEAM_LABEL",
    "WORKFLOW_IDENTITY_ENV",
    "WORKFLOW_LABEL",
    "param_value",
    "step_env",
    "tag",
    "tag_value",
]

# ---- files ---------------------------------------------------------------------------------

SCRATCH = "/gangway"
"""Per-step scratch space in a compiled template; locally a directory per step attempt."""
OUT_DIR = f"{SCRATCH}/out"
"""Where a step writes its output parameters, one file per name."""
HERA_OUTPUTS = "/tmp/hera-outputs"
"""Where Hera's runner scripts write output parameters; per step attempt locally, too."""

# ---- labels and annotations ----------------------------------------------------------------

LABEL_PREFIX = "gangway.dev"
TEAM_LABEL = f"{LABEL_PREFIX}/team"
QUEUE_LABEL = f"{LABEL_PREFIX}/queue"
PIPELINE_LABEL = f"{LABEL_PREFIX}/pipeline"
STEP_LABEL = f"{LABEL_PREFIX}/step"
"""On a gang's pods: the step that created their Volcano Job."""
EXPERIMENT_ANNOTATION = f"{LABEL_PREFIX}/mlflow-experiment-id"
"""Set by ``gangway submit``/``deploy``: the experiment the Argo UI's MLflow link opens."""
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
"""Argo's label naming the workflow a pod belongs to; gang pods carry it too."""
PRIORITY_CLASS_PARAM = "priority-class"
"""The workflow parameter naming the priority class of the run's gangs (one its team may use)."""
SEMAPHORE_CONFIGMAP = "gangway-semaphores"
"""In each team's namespace: the team's key holds how many of its workflows may run at once."""

# ---- environment ---------------------------------------------------------------------------

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_PIPELINE = "GANGWAY_PIPELINE"
ENV_TEAM = "GANGWAY_TEAM"
ENV_QUEUE = "GANGWAY_QUEUE"
ENV_WORKFLOW_PARAMS = "GANGWAY_WORKFLOW_PARAMS"
ENV_LINEAGE_SPOOL = "GANGWAY_LINEAGE_SPOOL"
ENV_LOCAL_RUN = "GANGWAY_LOCAL_RUN"
"""Set by ``gangway run`` for every step: the run replays lineage itself as steps end and
records the workflow's end when it returns, so the exit handler has nothing to send."""
ENV_LINEAGE_REPLAY = "GANGWAY_LINEAGE_REPLAY"
"""``later`` (what pipelines set): a step only spools its lineage and exits; ``gangway run``,
the workflow's exit handler and ``gangway lineage sync --follow`` send it to MLflow. Unset (a
step run by hand): the step sends it itself before it exits."""
ENV_STEP = "GANGWAY_STEP"
ENV_OUTPUTS = "GANGWAY_OUTPUTS"
ENV_GPUS = "GANGWAY_GPUS"
"""How many GPUs the pod was given (its ``nvidia.com/gpu`` limit): a step refuses to start when
CUDA sees fewer (:func:`components.devices.step_device`), instead of running on the CPU."""
ENV_METRICS_DIR = "GANGWAY_METRICS_DIR"
"""Where a step process writes its Prometheus samples (prometheus-client's multiprocess files,
which outlive a SIGKILLed process): set by ``gangway run`` for the whole run, and in a pod by
whatever serves them (:mod:`gangway.step.metrics`). Unset, a step records no metrics and never
imports prometheus-client."""
ENV_METRICS_PORT = "GANGWAY_METRICS_PORT"
"""On a cluster: the port a step's pod serves ``/metrics`` on (:data:`METRICS_PORT`)."""
ENV_SUBMITTED_MS = "GANGWAY_SUBMITTED_MS"
"""When this attempt was submitted (Unix ms): locally, when the gang's Job was created; the
attempt's queue wait is from then until its processes all run (:mod:`gangway.step.tracking`)."""
ENV_GPU_MODEL = "GANGWAY_GPU_MODEL"
"""The GPU model a GPU pod's nodes have (the ``gpu_product`` it selects), for usage by model."""
ENV_EXIT_DIR = "GANGWAY_EXIT_DIR"
"""Set by the gang launcher (:mod:`gangway.step.launch`): where each rank writes its exit code."""

METRICS_PORT = 9400
"""The container port every Gangway step pod serves its metrics on."""
METRICS_PORT_NAME = "metrics"
"""That port's name, which the PodMonitor selects."""

LINEAGE_SPOOL = "{{workflow.parameters.storage-root}}/runs/{{workflow.uid}}/lineage"
"""Where steps spool lineage records until MLflow has them (see :mod:`gangway.step.tracking`)."""

WORKFLOW_IDENTITY_ENV: dict[str, str] = {
    "name": "GANGWAY_WORKFLOW_NAME",
    "uid": "GANGWAY_WORKFLOW_UID",
    "namespace": "GANGWAY_NAMESPACE",
    "cluster": "GANGWAY_CLUSTER",
    "git_sha": "GANGWAY_GIT_SHA",
    "image": "GANGWAY_IMAGE",
}
"""Field of :class:`gangway.lineage.records.WorkflowInfo` → the variable that carries it."""

STEP_ENV: dict[str, str] = {
    ENV_TRACKING_URI: "{{workflow.parameters.mlflow-tracking-uri}}",
    ENV_PIPELINE: "{{workflow.labels." + PIPELINE_LABEL + "}}",
    ENV_TEAM: "{{workflow.labels." + TEAM_LABEL + "}}",
    ENV_QUEUE: "{{workflow.labels." + QUEUE_LABEL + "}}",
    WORKFLOW_IDENTITY_ENV["name"]: "{{workflow.name}}",
    WORKFLOW_IDENTITY_ENV["uid"]: "{{workflow.uid}}",
    WORKFLOW_IDENTITY_ENV["namespace"]: "{{workflow.namespace}}",
    WORKFLOW_IDENTITY_ENV["cluster"]: "{{workflow.parameters.cluster}}",
    WORKFLOW_IDENTITY_ENV["git_sha"]: "{{workflow.parameters.git-sha}}",
    WORKFLOW_IDENTITY_ENV["image"]: "{{workflow.parameters.image}}",
    ENV_LINEAGE_SPOOL: LINEAGE_SPOOL,
    ENV_LINEAGE_REPLAY: "later",
    ENV_METRICS_PORT: str(METRICS_PORT),
}
"""The environment every step receives, as Argo placeholders (in this order)."""


def step_env(step_name: str, *, params: bool = True) -> list[tuple[str, str]]:
    """``(name, value)`` of every variable a step receives (values are Argo placeholders).

    ``params=False`` leaves out the workflow parameters as JSON: inside a resource template's
    manifest (YAML text) a value with a quote would break it; container steps record them.
    """
    env = [*STEP_ENV.items(), (ENV_STEP, step_name), (ENV_OUTPUTS, OUT_DIR)]
    if params:
        env.append((ENV_WORKFLOW_PARAMS, "{{workflow.parameters.json}}"))
    return env


# ---- exit codes ----------------------------------------------------------------------------

EXIT_OK = 0
EXIT_PERMANENT = 1
"""Bad config or bad data: retrying cannot help."""
EXIT_TRANSIENT = 75
"""``EX_TEMPFAIL``: the step detected a failure that may go away on retry."""
EXIT_KILLED = 137
"""SIGKILL: out of memory, or the node was lost."""
EXIT_PREEMPTED = 143
"""SIGTERM (preemption), after saving what it could."""

# ---- MLflow --------------------------------------------------------------------------------

TAG_PREFIX = "gangway"
"""Prefix of every MLflow tag Gangway writes."""
MAX_PARAM_CHARS = 6000
"""MLflow's limit on a parameter value."""
MAX_TAG_CHARS = 8000
"""MLflow's limit on a tag value."""


def tag(name: str) -> str:
    """The MLflow tag ``gangway.NAME``."""
    return f"{TAG_PREFIX}.{name}"


def param_value(value: object) -> str:
    """A parameter value as MLflow keeps it (cut to its limit)."""
    return str(value)[:MAX_PARAM_CHARS]


def tag_value(value: object) -> str:
    """A tag value as MLflow keeps it (cut to its limit)."""
    return str(value)[:MAX_TAG_CHARS]
