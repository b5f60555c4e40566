"""A workload as admission and placement see it: one gang of pods of one shape, the team and
queue it goes to, its priority class, the GPU model it needs, how close its pods must be, and
where its data is.

:func:`gang_workloads` reads the gangs of a compiled pipeline (the Volcano Jobs of its resource
templates, filled with the run's parameter values); :func:`workload_of_job` reads one Job;
:func:`load_workloads` reads a workload file — what a platform engineer writes to ask "what
happens if this gang arrives now" (``gangway explain --workload FILE``; the format is
:class:`WorkloadSpec`, and ``example`` is :data:`EXAMPLE_WORKLOAD`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gangway.errors import (
    FieldError,
    FieldErrors,
    PermanentError,
    closest,
    field_errors,
    validation_errors,
)
from gangway.scheduling.snapshot.cluster_state import Amount, requested
from gangway.units import amount

__all__ = [
    "EXAMPLE_WORKLOAD",
    "Workload",
    "WorkloadSpec",
    "gang_workloads",
    "load_workloads",
    "place_gangs",
    "region_of",
    "workload_of_job",
]

EXAMPLE_WORKLOAD = Path(__file__).parent / "example_workload.yaml"


@dataclass(frozen=True)
class Workload:
    name: str
    pods: int
    per_pod: Amount
    team: str | None = None
    queue: str | None = None
    """Default: the team's queue."""
    priority_class: str | None = None
    """Default: the team's first allowed class."""
    gpu_type: str | None = None
    """The GPU model (the config's name); None: any model (or no GPUs)."""
    within: str | None = None
    """The topology tier the whole gang must stay within (``rack``); None: anywhere."""
    max_tier: int | None = None
    """The same by number (1 = closest), as a Job's hard ``networkTopology`` says it when the
    cluster, and so the tiers' names, is not known yet."""
    soft_topology: bool = False
    """Its Job already carries a ``soft`` ``networkTopology`` (a preference, not a constraint,
    but Volcano's preempt action skips the Job all the same)."""
    data_region: str | None = None
    """The region its input data is in (for locality); None: unknown."""
    namespace: str = "default"
    fields: Mapping[str, str] = field(default_factory=dict)
    """Where each attribute came from, for errors (``priority_class`` → ``-p priority-class``)."""

    @property
    def carries_topology(self) -> bool:
        """Its Job has a ``networkTopology``, hard or soft: Volcano's preempt action skips it."""
        return self.within is not None or self.max_tier is not None or self.soft_topology

    def path_of(self, name: str) -> str:
        """The field path to name in an error about attribute ``name``."""
        return self.fields.get(name, name)

    def total(self, key: str) -> int:
        """The gang's whole request of quota key ``key`` (see
        :mod:`gangway.scheduling.snapshot.cluster_state`)."""
        return requested(self.per_pod, self.pods, self.gpu_type, key)

    def shape(self) -> str:
        """``4 pods × 8 H100, 32 CPU, 256Gi``."""
        gpus = f"{self.per_pod.gpus} {self.gpu_type or 'GPU'}" if self.per_pod.gpus else "no GPU"
        cpu, mem = amount("cpu", self.per_pod.cpu), amount("memory", self.per_pod.memory)
        return f"{self.pods} pod{'' if self.pods == 1 else 's'} × {gpus}, {cpu} CPU, {mem}"


class WorkloadSpec(BaseModel):
    """One gang in a workload file: who sends it, its shape and where it may go. A file holds
    one such mapping, or ``workloads:`` and a list of them (decided one by one, each over the
    snapshot as it is: the first is not assumed to have started)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, min_length=1)
    """Default: the file's name (``-N`` after it for the N-th of a list, from 1)."""
    team: str = Field(min_length=1)
    queue: str | None = Field(None, min_length=1)
    """Default: the team's queue."""
    priority_class: str | None = Field(None, min_length=1)
    """Default: the team's first allowed class."""
    pods: int = Field(ge=1, strict=True)
    per_pod: Amount
    """``{cpu: 32, memory: 256Gi, gpus: 8}``: Kubernetes quantities."""
    gpu_type: str | None = Field(None, min_length=1)
    """The GPU model, as the platform config names it (``H100``); default: any model."""
    within: str | None = Field(None, min_length=1)
    """A topology tier the whole gang must stay within (``rack``): the Job's hard
    ``networkTopology``; default: anywhere."""
    data_region: str | None = Field(None, min_length=1)
    """The region the gang's input data is in (scores locality); default: unknown."""


def load_workloads(path: Path | str) -> list[Workload]:
    """The workloads of the file at ``path`` (``example``: :data:`EXAMPLE_WORKLOAD`), every
    problem reported at once, each at its field path."""
    from gangway.user_yaml import read_mapping

    where = EXAMPLE_WORKLOAD if str(path) == "example" else Path(path)
    raw = read_mapping(where, expected="a workload: team, pods, per_pod, … or workloads: [...]")
    many = "workloads" in raw
    if many and set(raw) != {"workloads"}:
        extra = ", ".join(sorted(set(raw) - {"workloads"}))
        raise PermanentError(f"{where}: {extra}: a file with workloads: holds nothing else")
    items = raw["workloads"] if many else [raw]
    if many and (not isinstance(items, list) or not items):
        raise PermanentError(f"{where}: workloads: give a list of workloads (mappings)")
    out, problems = [], []
    for i, item in enumerate(items):
        at = f"workloads[{i}]." if many else ""
        if not isinstance(item, dict):
            problems.append(FieldError(at.rstrip(".") or "(root)", "not a mapping of fields"))
            continue
        try:
            spec = WorkloadSpec.model_validate(item)
        except ValidationError as e:
            problems += validation_errors(
                e,
                root=at.rstrip(".") or "(root)",
                path=functools.partial(_dotted, at),
                hint=_field_hint,
            )
            continue
        default = where.stem + (f"-{i + 1}" if many else "")
        fields = {k: f"{where}: {at}{k}" for k in WorkloadSpec.model_fields}
        out.append(
            Workload(
                name=spec.name or default,
                pods=spec.pods,
                per_pod=spec.per_pod,
                team=spec.team,
                queue=spec.queue,
                priority_class=spec.priority_class,
                gpu_type=spec.gpu_type,
                within=spec.within,
                data_region=spec.data_region,
                fields=fields,
            )
        )
    if problems:
        raise FieldErrors(str(where), problems)
    return out


def _field_hint(err: dict[str, Any]) -> str:
    """For a field the format does not have: the one it most likely meant."""
    if err.get("type") != "extra_forbidden" or not err.get("loc"):
        return ""
    known = Amount.model_fields if len(err["loc"]) > 1 else WorkloadSpec.model_fields
    near = closest(str(err["loc"][-1]), known)
    return f"did you mean {near!r}?" if near else f"the fields: {', '.join(known)}"


def _dotted(prefix: str, loc: tuple[Any, ...]) -> str:
    """A pydantic location as the user writes the path: ``workloads[0].per_pod.gpus``."""
    return prefix + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc).lstrip(".")


def workload_of_job(
    job: Mapping[str, Any],
    *,
    name: str,
    team: str | None,
    product_models: Mapping[str, str] | None = None,
    tiers: list[str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> Workload:
    """The workload of a Volcano Job manifest: its pods (every task, each pod sized as the
    largest task's), queue, priority class, the GPU model its node selector asks for
    (``product_models`` maps a product label back to the config's name) and the topology tier
    its ``networkTopology`` allows (``tiers``: the cluster's, closest first)."""
    from gangway.volcano.demand import job_demand

    d = job_demand(job)
    models = product_models or {}
    gpu_type = models.get(d.gpu_product, d.gpu_product) if d.gpu_product else None
    within, max_tier = None, d.highest_tier
    if d.highest_tier is not None and tiers and 1 <= d.highest_tier <= len(tiers):
        within, max_tier = tiers[d.highest_tier - 1], None
    if not d.gpus_whole:
        where = (fields or {}).get("per_pod", "the pods' GPU requests")
        raise PermanentError(f"{where}: GPUs are whole devices; request 1, 2, … per pod")
    try:
        per_pod = Amount(cpu=f"{d.cpu_millis}m", memory=d.memory, gpus=d.gpus)
    except ValidationError as e:
        where = (fields or {}).get("per_pod", "the pods' requests")
        problem = field_errors(e, root="per_pod", path=lambda loc: str(loc[0]))
        raise PermanentError(f"{where}: {problem}") from None
    return Workload(
        name=name,
        pods=d.pods,
        per_pod=per_pod,
        team=team,
        queue=d.queue,
        priority_class=d.priority_class,
        gpu_type=gpu_type,
        within=within,
        max_tier=max_tier,
        soft_topology=d.soft_topology,
        namespace=d.namespace or "default",
        fields=dict(fields or {}),
    )


def gang_workloads(
    obj: Mapping[str, Any],
    values: Mapping[str, str],
    *,
    data_region: str | None = None,
    product_models: Mapping[str, str] | None = None,
) -> list[Workload]:
    """The gangs a pipeline (a compiled Workflow or WorkflowTemplate) would create with the
    parameter ``values``: each gang step's Job, filled as Argo would fill it, as a workload
    named after its task. Values only a run knows (another task's outputs) stay blank. Errors
    about a workload name the ``-p`` parameter (or label) that sets the field. A Job that
    already selects a GPU product is read back as its model (``product_models``: product →
    model)."""
    from gangway.argo.scope import parameter_values, workflow_scope, workflow_spec
    from gangway.contract import PRIORITY_CLASS_PARAM, QUEUE_LABEL, TEAM_LABEL
    from gangway.lint.values import with_values

    filled = with_values(obj, values)
    spec = workflow_spec(filled)
    meta = filled.get("metadata") or {}
    labels = meta.get("labels") or {}
    scope = workflow_scope(
        name=str(meta.get("name") or meta.get("generateName") or "workflow"),
        uid="uid",
        namespace=str(meta.get("namespace") or "default"),
        parameters=parameter_values(spec),
        labels=labels,
    )
    out = []
    for task, job, params in _gang_jobs(spec, scope):
        fields = {
            "team": f"metadata.labels.{TEAM_LABEL}",
            "queue": f"metadata.labels.{QUEUE_LABEL}",
            "priority_class": f"-p {PRIORITY_CLASS_PARAM}",
            "pods": f"-p {params.get('nodes', 'nodes')}",
            "per_pod": f"-p {params.get('gpus-per-node', 'gpus-per-node')}",
            "gpu_type": "--gpu-type",
            "within": "--within",
        }
        w = workload_of_job(
            job,
            name=task,
            team=labels.get(TEAM_LABEL),
            product_models=product_models,
            fields=fields,
        )
        out.append(replace(w, queue=w.queue or labels.get(QUEUE_LABEL), data_region=data_region))
    return out


_WORKFLOW_PARAM = re.compile(r"^\{\{\s*workflow\.parameters\.([-\w.]+)\s*\}\}$")


def _gang_jobs(
    spec: Mapping[str, Any], scope: Mapping[str, str]
) -> list[tuple[str, Any, dict[str, str]]]:
    """``(task, filled Job manifest, input → the workflow parameter it is passed)`` for each
    DAG task whose template creates a Job."""
    import yaml

    from gangway.argo.scope import inputs_scope
    from gangway.argo.substitution import fill_known
    from gangway.user_yaml import load_yaml, yaml_problem
    from gangway.volcano.gang import is_job

    found = []
    for task, resource in _resource_tasks(spec):
        args = (task.get("arguments") or {}).get("parameters") or []
        raw = {str(a.get("name")): str(a.get("value", "")) for a in args}
        inputs = {k: fill_known(v, scope, "") for k, v in raw.items()}
        text = fill_known(resource["manifest"], {**scope, **inputs_scope(inputs)}, "")
        try:
            job = load_yaml(text)
        except yaml.YAMLError as e:
            raise PermanentError(
                f"task {task.get('name')}: its manifest is not YAML: {yaml_problem(e)}"
            ) from None
        if is_job(job):
            params = {k: m.group(1) for k, v in raw.items() if (m := _WORKFLOW_PARAM.match(v))}
            found.append((str(task.get("name")), job, params))
    return found


def _resource_tasks(spec: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """``(task, its template's resource)`` for each DAG task whose template holds a resource
    manifest (the resource is the spec's own: a change to it changes the spec)."""
    templates = {t.get("name"): t for t in spec.get("templates") or []}
    for t in templates.values():
        for task in (t.get("dag") or {}).get("tasks") or []:
            resource = (templates.get(task.get("template")) or {}).get("resource") or {}
            if resource.get("manifest"):
                yield task, resource


def region_of(uris: Iterable[str], buckets: Mapping[str, str]) -> str | None:
    """The region whose artifact bucket (``buckets``: region → ``s3://bucket``) holds the first
    of ``uris`` that is in one; None when none is."""
    for uri in uris:
        for region, bucket in buckets.items():
            root = bucket.rstrip("/")
            if uri == root or uri.startswith(root + "/"):
                return region
    return None


def place_gangs(
    obj: Mapping[str, Any], topologies: Mapping[str, Any], *, every: Any = None
) -> dict[str, Any]:
    """A copy of the pipeline ``obj`` whose gang steps carry their placement: ``topologies``
    maps a gang task's name to its :class:`gangway.scheduling.placement.Topology` (``every``: the
    one for the tasks it does not name). Tasks that share a template get what allows all of them:
    the widest tier, hard only when every one is."""
    import copy

    from gangway.argo.scope import workflow_spec
    from gangway.volcano.demand import place_manifest

    out = copy.deepcopy(dict(obj))
    wanted: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for task, resource in _resource_tasks(workflow_spec(out)):
        topo = topologies.get(str(task.get("name")), every)
        if topo is not None:
            wanted.setdefault(str(task.get("template")), (resource, []))[1].append(topo)
    for name, (resource, topos) in wanted.items():
        tiers = [t.tier for t in topos]
        products = {t.gpu_product for t in topos}
        try:
            resource["manifest"] = place_manifest(
                resource["manifest"],
                tier=None if None in tiers else max(t for t in tiers if t is not None),
                hard=all(t.hard for t in topos),
                gpu_product=products.pop() if len(products) == 1 else None,
            )
        except PermanentError as e:
            raise PermanentError(f"template {name}: {e}") from None
    return out
