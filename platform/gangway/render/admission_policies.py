"""ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``, CEL, GA since Kubernetes
1.30) and their bindings: the cluster refuses what ``gangway lint`` checks, whoever creates the
object. Every Pod and Volcano Job created or updated in a team namespace is checked by

* ``gangway-restricted-pods`` / ``-jobs``, bound to every namespace labelled
  ``gangway.dev/team``: Pod Security "restricted" essentials (not privileged, no privilege
  escalation, ``runAsNonRoot`` on the container or the pod, capabilities drop ALL and add at
  most NET_BIND_SERVICE, no host network/PID/IPC, no hostPath) and images only from the
  config's ``registries``, for every container of a pod or a Job's templates: ``containers``
  (a template's main container, sidecars, a containerSet's: inline templates and
  ``templateDefaults`` included, the policy sees the pod Argo made, ``podSpecPatch`` applied),
  ``initContainers`` and ``ephemeralContainers`` (``kubectl debug`` adds them through
  ``pods/ephemeralcontainers``, matched too). One exception (``docs/gpu-clusters.md``):
  IPC_LOCK in a container with an RDMA device of a gang pod — a Job's template, or a pod a
  Volcano Job controls (an owner reference, which Argo templates cannot set; a label they can);
* ``gangway-team-TEAM-pods`` / ``-jobs``, bound to the namespace labelled
  ``gangway.dev/team: TEAM``: the team's queue, priority classes and GPU caps.

Why a team's values are inlined in its CEL (not params), and Jobs checked as well as pods:
``docs/security.md``.

* **Queue.** A pod carries ``gangway.dev/queue`` (set by Gangway pipelines) or
  ``volcano.sh/queue-name`` (set by Volcano on a Job's pods), and every queue label or
  annotation Volcano reads names the team's queue. A Job's ``spec.queue`` is the team's queue
  (Volcano's webhook fills ``default`` when unset, before validation), and the Job carries the
  team's queue as its ``gangway.dev/queue`` label too (gang steps copy the workflow's label).
* **Priority class.** A class a pod or Job names must be one of the team's. A missing one is
  allowed when the team may use a class of value >= 0: Kubernetes fills in a ``globalDefault``
  class before validation (checked like any other), else the pod runs at priority 0. A Job's
  template without a class takes the Job's (Volcano copies it).
* **GPUs.** Per pod, the ``nvidia.com/gpu`` limits of its containers add up to at most the
  team's largest per-type GPU capability (an init container alone too); per Job, replicas
  times GPUs per pod over its tasks add up to at most the team's total GPU capability. The
  capability is the team's, else its org's, else the most each cluster type has. Portable
  CEL has no sum (Kubernetes' ``sum()`` is its own library), so sums are spelled out over the
  first :data:`MAX_GPU_PARTS` GPU-using containers (tasks) and a rule refuses more.
* **The cluster must** let only administrators label namespaces (the label is the trust
  boundary, as for Pod Security) and configure Argo's executor (``init``/``wait`` containers)
  with an image from an allowed registry and a restricted ``securityContext``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gangway.config import PlatformConfig, TeamView
from gangway.contract import PRIORITY_CLASS_PARAM, QUEUE_LABEL, TEAM_LABEL
from gangway.units import (
    GPU_RESOURCE,
    IPC_LOCK,
    RDMA_RESOURCE_NAMES,
    RDMA_RESOURCE_PREFIXES,
    RDMA_RESOURCES,
)
from gangway.volcano.cel import (
    JOB_POD_SPEC_PATH,
    JOB_POD_SPECS,
    JOB_PRIORITY_CLASS,
    JOB_PRIORITY_CLASS_PATH,
    JOB_QUEUE,
    JOB_QUEUE_PATH,
    JOB_TASK_REPLICAS_PATH,
    POD_QUEUE_ANNOTATIONS,
    POD_QUEUE_LABEL,
    job_resource_rule,
    job_task_totals,
)
from gangway.volcano.job import JOB_API_VERSION, JOB_KIND

__all__ = ["API_VERSION", "MAX_GPU_PARTS", "gpu_caps", "policies"]

API_VERSION = "admissionregistration.k8s.io/v1"
OPERATIONS = ("CREATE", "UPDATE")
MAX_GPU_PARTS = 8
"""At most this many containers of a pod, and tasks of a Job, may request GPUs."""
RESTRICTED = "Pod Security restricted"
EPHEMERAL = "pods/ephemeralcontainers"
Object = dict[str, Any]


@dataclass(frozen=True)
class _Kind:
    """What a policy matches, and where the pod specs are in it."""

    name: str
    rule: dict[str, list[str]]
    pod_specs: str
    """CEL: the list of pod specs in ``object``."""
    path: str
    """A pod spec's field path, for messages."""
    inherits_class: str
    """CEL: whether a pod spec without a priority class gets one from its owner."""


PODS = _Kind(
    "pods",
    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": [*OPERATIONS]},
    "[object.spec]",
    "spec",
    "false",
)
RESTRICTED_PODS = replace(PODS, rule={**PODS.rule, "resources": ["pods", EPHEMERAL]})
JOBS = _Kind(
    "jobs",
    job_resource_rule(OPERATIONS),
    JOB_POD_SPECS,
    JOB_POD_SPEC_PATH,
    f"has({JOB_PRIORITY_CLASS})",
)


def policies(cfg: PlatformConfig) -> list[Object]:
    """Every policy, then every binding, in a fixed order: the restricted pair, then each
    team's pair in the config's order."""
    every_team: Object = {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
    made = [(_restricted(k, cfg.registries), every_team) for k in (RESTRICTED_PODS, JOBS)]
    for team in cfg.team_views().values():
        one_team: Object = {"matchLabels": {TEAM_LABEL: team.name}}
        made += [(_team(kind, cfg, team), one_team) for kind in (PODS, JOBS)]
    return [p for p, _ in made] + [_binding(p, selector) for p, selector in made]


def gpu_caps(cfg: PlatformConfig, team: TeamView) -> tuple[int, int]:
    """``(per pod, per Job)``: the team's largest per-type GPU capability, and its total."""
    org = cfg.orgs[team.org].capability if team.org else None
    given = [dict(q.gpu) for q in (team.quota.capability, org) if q is not None and q.gpu]
    clusters = cfg.clusters.values()
    most = {t: max(c.gpus.get(t, 0) for c in clusters) for t in sorted(cfg.gpu_types())}
    caps = given[0] if given else most
    return max(caps.values(), default=0), sum(caps.values())


# ---- CEL -----------------------------------------------------------------------------------


def _lit(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _list(items: Iterable[str]) -> str:
    return "[" + ", ".join(_lit(i) for i in items) + "]"


CONTAINERS = "(s.containers + (has(s.initContainers) ? s.initContainers : []) + "
CONTAINERS += "(has(s.ephemeralContainers) ? s.ephemeralContainers : []))"
VOLUMES = "(has(s.volumes) ? s.volumes : [])"
LABELS = "has(object.metadata.labels) ? object.metadata.labels : {}"
ANNOTATIONS = "has(object.metadata.annotations) ? object.metadata.annotations : {}"
VOLCANO_OWNED = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists("
VOLCANO_OWNED += f"r, r.apiVersion == {_lit(JOB_API_VERSION)} && r.kind == {_lit(JOB_KIND)} && "
VOLCANO_OWNED += "has(r.controller) && r.controller)"
RDMA = " || ".join(f"k.startsWith({_lit(p)})" for p in RDMA_RESOURCE_PREFIXES)
RDMA = f"has(x.resources) && has(x.resources.limits) && x.resources.limits.exists(k, ({RDMA} || "
RDMA += f"k in {_list(RDMA_RESOURCES)}) && string(x.resources.limits[k]) != '0')"


def _gpus(c: str) -> str:
    """CEL: the GPUs container ``c`` is limited to (Kubernetes requires the limit for an
    extended resource; its request defaults to it and must equal it)."""
    gpu, at = _lit(GPU_RESOURCE), f"{c}.resources"
    return f"(has({at}) && has({at}.limits) && {gpu} in {at}.limits ? int({at}.limits[{gpu}]) : 0)"


def _gpu_parts(spec: str) -> str:
    """CEL: the GPUs of each container of pod spec ``spec`` that asks for any."""
    return f"{spec}.containers.map(c, {_gpus('c')}).filter(n, n > 0)"


def _sum(items: str) -> str:
    """CEL: the sum of the first :data:`MAX_GPU_PARTS` ints of the list ``items``."""
    return " + ".join(f"(size({items}) > {i} ? {items}[{i}] : 0)" for i in range(MAX_GPU_PARTS))


def _rule(expression: str, message: str, message_expression: str | None = None) -> Object:
    more = {"messageExpression": message_expression} if message_expression else {}
    return {"expression": expression, "message": message, **more}


def _each(items: str, what: str, check: str, message: str) -> Object:
    """A rule that ``check`` holds for every ``x`` of ``items`` of every pod spec ``s``; the
    message names the first that fails (``what`` and its name)."""
    first = f"variables.podSpecs.map(s, {items}.filter(x, !({check}))).filter(l, size(l) > 0)[0][0]"
    return _rule(
        f"variables.podSpecs.all(s, {items}.all(x, {check}))",
        message,
        f"{_lit(what + ' ')} + {first}.name + {_lit(': ' + message)}",
    )


def _variables(kind: _Kind, *more: tuple[str, str]) -> list[Object]:
    return [{"name": n, "expression": e} for n, e in [("podSpecs", kind.pod_specs), *more]]


# ---- policies ------------------------------------------------------------------------------


def _policy(name: str, kind: _Kind, variables: list[Object], rules: list[Object]) -> Object:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [kind.rule]},
            "variables": variables,
            "validations": rules,
        },
    }


def _binding(policy: Object, namespaces: Object) -> Object:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": dict(policy["metadata"]),
        "spec": {
            "policyName": policy["metadata"]["name"],
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": namespaces},
        },
    }


def _restricted(kind: _Kind, registries: Sequence[str]) -> Object:
    p, sc = kind.path, "x.securityContext"

    def set_(field: str) -> str:
        return f"has({sc}) && has({sc}.{field})"

    containers = [
        (
            f"!({set_('privileged')} && {sc}.privileged)",
            "securityContext.privileged: privileged containers are not allowed in team "
            "namespaces; remove privileged: true",
        ),
        (
            f"{set_('allowPrivilegeEscalation')} && !{sc}.allowPrivilegeEscalation",
            f"securityContext.allowPrivilegeEscalation: must be false ({RESTRICTED}); set "
            "allowPrivilegeEscalation: false",
        ),
        (
            f"{set_('runAsNonRoot')} ? {sc}.runAsNonRoot : (has(s.securityContext) && "
            "has(s.securityContext.runAsNonRoot) && s.securityContext.runAsNonRoot)",
            f"securityContext.runAsNonRoot: must be true on the container or the pod "
            f"({RESTRICTED}); set runAsNonRoot: true and run as a non-root user",
        ),
        (
            f"{set_('capabilities')} && has({sc}.capabilities.drop) && 'ALL' in "
            f"{sc}.capabilities.drop && (!has({sc}.capabilities.add) || "
            f"{sc}.capabilities.add.all(a, a == 'NET_BIND_SERVICE' || "
            f"(a == {_lit(IPC_LOCK)} && variables.gang && {RDMA})))",
            "securityContext.capabilities: must drop ALL and add nothing but NET_BIND_SERVICE "
            f"({RESTRICTED}), or IPC_LOCK in a gang pod, in a container with an RDMA device in "
            f"its limits ({RDMA_RESOURCE_NAMES}); set capabilities: {{drop: [ALL]}}",
        ),
        (
            f"has(x.image) && {_list(registries)}.exists(r, x.image.startsWith(r))",
            f"image: must come from an allowed registry ({', '.join(registries)}); push the "
            "image there and use that name",
        ),
    ]
    rules = [_each(CONTAINERS, "container", c, f"{p}.containers[*].{m}") for c, m in containers]
    rules += [
        _rule(
            f"variables.podSpecs.all(s, !has(s.{field}) || !s.{field})",
            f"{p}.{field}: not allowed in team namespaces ({RESTRICTED}); remove it",
        )
        for field in ("hostNetwork", "hostPID", "hostIPC")
    ]
    host_path = f"{p}.volumes[*].hostPath: host paths are not allowed in team namespaces "
    host_path += f"({RESTRICTED}); use an emptyDir or a PersistentVolumeClaim"
    rules.append(_each(VOLUMES, "volume", "!has(x.hostPath)", host_path))
    gang = ("gang", "true" if kind is JOBS else VOLCANO_OWNED)
    return _policy(f"gangway-restricted-{kind.name}", kind, _variables(kind, gang), rules)


def _team(kind: _Kind, cfg: PlatformConfig, team: TeamView) -> Object:
    per_pod, per_job = gpu_caps(cfg, team)
    classes = [
        cfg.priority_classes[c].value for c in team.priority_classes if c in cfg.priority_classes
    ]
    unset_ok = "true" if any(v >= 0 for v in classes) else kind.inherits_class
    more = [("labels", LABELS), ("gpus", f"variables.podSpecs.map(s, {_gpu_parts('s')})")]
    more.append(("podGPUs", f"variables.gpus.map(l, {_sum('l')})"))
    if kind is PODS:
        more.insert(1, ("annotations", ANNOTATIONS))
        rules = _pod_queue(team)
    else:
        per_task = job_task_totals(lambda spec: f"[{_gpu_parts(spec)}].map(l, {_sum('l')})[0]")
        more += [
            ("taskGPUs", f"{per_task}.filter(n, n > 0)"),
            ("jobGPUs", _sum("variables.taskGPUs")),
        ]
        rules = _job_queue(team)
    rules += _classes(kind, team, unset_ok)
    rules += _gpu_rules(kind, team, per_pod, per_job)
    policy = _policy(f"gangway-team-{team.name}-{kind.name}", kind, _variables(kind, *more), rules)
    policy["metadata"]["labels"] = {TEAM_LABEL: team.name}
    return policy


def _pod_queue(team: TeamView) -> list[Object]:
    q, notes = _lit(team.queue), _list(POD_QUEUE_ANNOTATIONS)
    labels = _list([QUEUE_LABEL, POD_QUEUE_LABEL])
    fix = f"must be {team.queue}, the queue of team {team.name}"
    wrong = (
        f"{labels}.filter(k, k in variables.labels && variables.labels[k] != {q})"
        ".map(k, 'metadata.labels[' + k + '] is ' + variables.labels[k]) + "
        f"{notes}.filter(k, k in variables.annotations && variables.annotations[k] != {q})"
        ".map(k, 'metadata.annotations[' + k + '] is ' + variables.annotations[k])"
    )
    return [
        _rule(
            f"{labels}.exists(k, k in variables.labels)",
            f"metadata.labels[{QUEUE_LABEL}]: missing; a pod of team {team.name} names its "
            f"queue: set the label to {team.queue} (Gangway pipelines do)",
        ),
        _rule(
            f"{labels}.all(k, !(k in variables.labels) || variables.labels[k] == {q}) && "
            f"{notes}.all(k, !(k in variables.annotations) || variables.annotations[k] == {q})",
            f"metadata.labels[{QUEUE_LABEL}]: {fix}; submit to it",
            f"({wrong})[0] + {_lit(': ' + fix + '; submit to it')}",
        ),
    ]


def _job_queue(team: TeamView) -> list[Object]:
    q, key = _lit(team.queue), _lit(QUEUE_LABEL)
    fix = f"must be {team.queue}, the queue of team {team.name}"
    return [
        _rule(
            f"has({JOB_QUEUE}) && {JOB_QUEUE} == {q}",
            f"{JOB_QUEUE_PATH}: {fix}; gang steps use the workflow label {QUEUE_LABEL}",
            f"{_lit(JOB_QUEUE_PATH + ' is ')} + (has({JOB_QUEUE}) ? {JOB_QUEUE} : 'unset') + "
            f"{_lit(': ' + fix + '; gang steps use the workflow label ' + QUEUE_LABEL)}",
        ),
        _rule(
            f"{key} in variables.labels && variables.labels[{key}] == {q}",
            f"metadata.labels[{QUEUE_LABEL}]: {fix}; gang steps copy the workflow's label",
        ),
    ]


def _classes(kind: _Kind, team: TeamView, unset_ok: str) -> list[Object]:
    allowed = _list(team.priority_classes)
    fix = f"team {team.name} may use {', '.join(team.priority_classes)}; set the workflow "
    fix += f"parameter {PRIORITY_CLASS_PARAM} to one of them"
    named = "has(s.priorityClassName)"
    bad = f"variables.podSpecs.filter(s, {named} && !(s.priorityClassName in {allowed}))"
    path = f"{kind.path}.priorityClassName"
    rules = [
        _rule(
            f"variables.podSpecs.all(s, {named} ? s.priorityClassName in {allowed} : {unset_ok})",
            f"{path}: {fix}",
            f"{_lit(path + ' is ')} + {bad}.map(s, s.priorityClassName)[0] + {_lit(': ' + fix)}",
        )
    ]
    if kind is JOBS:
        rules.append(
            _rule(
                f"!has({JOB_PRIORITY_CLASS}) || {JOB_PRIORITY_CLASS} in {allowed}",
                f"{JOB_PRIORITY_CLASS_PATH}: {fix}",
                f"{_lit(JOB_PRIORITY_CLASS_PATH + ' is ')} + {JOB_PRIORITY_CLASS} + "
                f"{_lit(': ' + fix)}",
            )
        )
    return rules


def _gpu_rules(kind: _Kind, team: TeamView, per_pod: int, per_job: int) -> list[Object]:
    field = f"{kind.path}.containers[*].resources.limits[{GPU_RESOURCE}]"
    bounded = f"variables.gpus.all(l, size(l) <= {MAX_GPU_PARTS})"
    parts = "containers of a pod"
    if kind is JOBS:
        bounded += f" && size(variables.taskGPUs) <= {MAX_GPU_PARTS}"
        parts += ", and tasks of a Job,"
    fix = f"a pod of team {team.name} may use at most {per_pod} GPUs; ask for fewer per pod"
    init_ok = "variables.podSpecs.all(s, !has(s.initContainers) || "
    init_ok += f"s.initContainers.all(c, {_gpus('c')} <= {per_pod}))"
    rules = [
        _rule(bounded, f"{field}: at most {MAX_GPU_PARTS} {parts} may ask for GPUs; merge them"),
        _rule(
            f"variables.podGPUs.all(n, n <= {per_pod}) && {init_ok}",
            f"{field}: {fix}",
            f"{_lit(field + ': a pod asks for ')} + "
            f"string(variables.podGPUs.filter(n, n > {per_pod})[0]) + {_lit(' GPUs; ' + fix)}",
        ),
    ]
    if kind is JOBS:
        total = f"team {team.name} may use at most {per_job} GPUs at once (its queue capability); "
        total += "use fewer nodes or fewer GPUs per node"
        what = f"{JOB_TASK_REPLICAS_PATH} times {GPU_RESOURCE} per pod"
        rules.append(
            _rule(
                f"variables.jobGPUs <= {per_job}",
                f"{what}: {total}",
                f"{_lit(what + ': the Job asks for ')} + string(variables.jobGPUs) + "
                f"{_lit(' GPUs; ' + total)}",
            )
        )
    return rules
