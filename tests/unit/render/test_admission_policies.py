"""The admission policies (:mod:`gangway.render.admission_policies`), their CEL evaluated here with
cel-python as the API server would: the objects the reference pipeline makes a cluster create
are admitted; broken variants are denied with the policy's message; each binding selects the
namespaces it should; every object is well formed."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from gangway.config import EXAMPLE, PlatformConfig, TeamView, load_config
from gangway.contract import QUEUE_LABEL, TEAM_LABEL, WORKFLOW_LABEL
from gangway.render.admission_policies import API_VERSION, MAX_GPU_PARTS, gpu_caps, policies
from gangway.volcano.cel import POD_QUEUE_ANNOTATIONS, POD_QUEUE_LABEL
from gangway.volcano.job import JOB_API_VERSION, JOB_KIND
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO

Obj = dict[str, Any]
CFG = load_config(EXAMPLE)
TEAMS = CFG.team_views()
RESEARCH = TEAMS["research"]
WORKFLOW = "train-eval-infer-7xk2p"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
PLURALS = {"Pod": "pods", JOB_KIND: "jobs"}


# ---- an admission chain: bindings, match rules, variables, validations ------------------------

_ENV = celpy.Environment()


@cache
def _program(expression: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(expression))


def _eval(expression: str, activation: Mapping[str, Any]) -> Any:
    result = _program(expression).evaluate(activation)
    if isinstance(result, CELEvalError):
        raise result
    return result


def _message(rule: Mapping[str, Any], activation: Mapping[str, Any]) -> str:
    """``messageExpression`` if it evaluates to a non-empty string, else ``message``."""
    if "messageExpression" in rule:
        try:
            text = _eval(rule["messageExpression"], activation)
        except CELEvalError:
            text = None
        if isinstance(text, str) and text.strip():
            return str(text)
    return str(rule["message"])


def violations(policy: Obj, obj: Obj) -> list[str]:
    """The message of each validation of ``policy`` that ``obj`` fails; an expression that
    cannot be evaluated fails too (``failurePolicy: Fail``)."""
    assert policy["spec"]["failurePolicy"] == "Fail"
    variables: dict[celtypes.StringType, Any] = {}
    activation = {"object": json_to_cel(obj), "variables": celtypes.MapType(variables)}
    for v in policy["spec"].get("variables", []):
        # the API server evaluates them lazily; an unusable one fails where it is used
        with contextlib.suppress(CELEvalError):
            variables[celtypes.StringType(v["name"])] = _eval(v["expression"], activation)
        activation["variables"] = celtypes.MapType(variables)
    out = []
    for rule in policy["spec"]["validations"]:
        try:
            ok = _eval(rule["expression"], activation)
        except CELEvalError as e:
            out.append(f"evaluation error: {e}")
            continue
        assert isinstance(ok, celtypes.BoolType), rule["expression"]
        if not ok:
            out.append(_message(rule, activation))
    return out


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    def holds(e: Mapping[str, Any]) -> bool:
        key, op = str(e["key"]), str(e["operator"])
        if op in ("Exists", "DoesNotExist"):
            return (key in labels) == (op == "Exists")
        return (labels.get(key) in e["values"]) == (op == "In")

    exact = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    return exact and all(holds(e) for e in selector.get("matchExpressions", []))


def _matches(policy: Obj, obj: Obj, operation: str) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    return any(
        group in r["apiGroups"]
        and version in r["apiVersions"]
        and PLURALS[obj["kind"]] in r["resources"]
        and operation in r["operations"]
        for r in policy["spec"]["matchConstraints"]["resourceRules"]
    )


def bound(objects: list[Obj], namespace_labels: Mapping[str, str]) -> list[str]:
    """The policies whose bindings select a namespace with ``namespace_labels``."""
    return [
        b["spec"]["policyName"]
        for b in objects
        if b["kind"] == BINDING
        and _selects(b["spec"]["matchResources"]["namespaceSelector"], namespace_labels)
    ]


def namespace_labels(team: TeamView) -> dict[str, str]:
    return {TEAM_LABEL: team.name, "kubernetes.io/metadata.name": team.namespace}


def admit(obj: Obj, team: TeamView = RESEARCH, cfg: PlatformConfig = CFG) -> list[str]:
    """What the API server answers when ``obj`` is created in ``team``'s namespace: every
    denial message (none: admitted)."""
    objects = policies(cfg)
    by_name = {p["metadata"]["name"]: p for p in objects if p["kind"] == POLICY}
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": team.namespace}}
    return [
        message
        for name in bound(objects, namespace_labels(team))
        if _matches(by_name[name], obj, "CREATE")
        for message in violations(by_name[name], obj)
    ]


# ---- what the reference pipeline makes a cluster create -------------------------------------


@pytest.fixture(scope="module")
def workflow() -> Obj:
    # The GPU variant: its gang asks for -p gpus-per-node GPUs, which the team's caps limit.
    wt: Obj = compile_pipeline(REPO / "pipelines" / "train_eval_infer_gpu.py")
    assert wt["metadata"]["labels"][TEAM_LABEL] == RESEARCH.name
    return wt


def _fill(text: str, wt: Obj, queue: str, params: Mapping[str, Any]) -> str:
    """Argo's substitution, with the workflow's defaults, ``params`` over them (a template's
    inputs are the workflow parameters of the same name), the team's queue as the workflow
    label and plain stand-ins for everything else."""
    p = {x["name"]: str(x["value"]) for x in wt["spec"]["arguments"]["parameters"]}
    p.update({k.replace("_", "-"): str(v) for k, v in params.items()})
    values = {
        f"{scope}.parameters.{k}": v for k, v in p.items() for scope in ("workflow", "inputs")
    }
    values["=asInt(inputs.parameters.nodes) - 1"] = str(int(p["nodes"]) - 1)
    values[f"workflow.labels.{QUEUE_LABEL}"] = queue
    values["workflow.name"] = WORKFLOW
    return re.sub(r"\{\{\s*(.*?)\s*\}\}", lambda m: values.get(m.group(1), "stand-in"), text)


def _template(wt: Obj, name: str) -> Obj:
    found: Obj = next(t for t in wt["spec"]["templates"] if t["name"] == name)
    return found


def volcano_job(wt: Obj, *, queue: str = RESEARCH.queue, **params: Any) -> Obj:
    """The train step's Job as Argo creates it: the manifest filled, named from its
    generateName, owned by the workflow; its labels are the manifest's own."""
    job: Obj = yaml.safe_load(
        _fill(_template(wt, "train")["resource"]["manifest"], wt, queue, params)
    )
    meta = job["metadata"]
    meta["name"] = meta.pop("generateName") + "b9m4q"
    meta["ownerReferences"] = [
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": WORKFLOW, "uid": "u1"}
    ]
    return job


def _spec_queue(job: Obj, queue: str) -> Obj:
    """``job`` sent to another queue than its label says."""
    job["spec"]["queue"] = queue
    return job


def gang_pod(job: Obj, task: int = 0) -> Obj:
    """A pod of ``job`` as Volcano's controller creates it: the task's template, the Job's
    scheduler and priority class where the template has none, its queue as label and
    annotation."""
    t, spec = job["spec"]["tasks"][task], job["spec"]
    pod_spec = copy.deepcopy(t["template"]["spec"])
    pod_spec.setdefault("schedulerName", spec["schedulerName"])
    if "priorityClassName" in spec:
        pod_spec.setdefault("priorityClassName", spec["priorityClassName"])
    name = job["metadata"]["name"]
    labels = {**t["template"]["metadata"]["labels"], POD_QUEUE_LABEL: spec["queue"]}
    labels["volcano.sh/job-name"] = name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{t['name']}-0",
            "labels": labels,
            "annotations": {POD_QUEUE_ANNOTATIONS[0]: spec["queue"]},
        },
        "spec": pod_spec,
    }


def step_pod(wt: Obj, step: str = "stage", *, queue: str = RESEARCH.queue) -> Obj:
    """A container step's pod as Argo creates it: the template's container (``main``) with
    the workflow's pod security context, its volumes and the workflow's pod labels."""
    template = _template(wt, step)
    container = json.loads(_fill(json.dumps(template["container"]), wt, queue, {}))
    spec = copy.deepcopy(wt["spec"])
    labels = {**spec["podMetadata"]["labels"], WORKFLOW_LABEL: WORKFLOW, QUEUE_LABEL: queue}
    labels["workflows.argoproj.io/completed"] = "false"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{WORKFLOW}-{step}-1234", "labels": labels},
        "spec": {
            "containers": [{**container, "name": "main"}],
            "securityContext": spec["securityContext"],
            "serviceAccountName": spec["serviceAccountName"],
            "restartPolicy": "Never",
            "volumes": copy.deepcopy(template.get("volumes", [])),
        },
    }


STEPS = ["stage", "split", "evaluate", "infer", "lineage-exit"]


# ---- admitted ------------------------------------------------------------------------------


def test_the_reference_pipeline_is_admitted(workflow: Obj) -> None:
    job = volcano_job(workflow)
    assert job["apiVersion"] == JOB_API_VERSION and job["spec"]["queue"] == RESEARCH.queue
    assert admit(job) == []
    for task in range(len(job["spec"]["tasks"])):
        assert admit(gang_pod(job, task)) == []
    for step in STEPS:
        assert admit(step_pod(workflow, step)) == []


def test_the_lineage_follower_of_every_team_is_admitted() -> None:
    """`gangway lineage sync --follow` runs in each team namespace under its policies."""
    from gangway.render.lineage import lineage_followers

    for deployment in lineage_followers(CFG, next(iter(CFG.clusters))):
        team = next(t for t in TEAMS.values() if t.namespace == deployment["metadata"]["namespace"])
        template = deployment["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "f-1", **template["metadata"]},
            "spec": template["spec"],
        }
        assert admit(pod, team) == [], team.name


@pytest.mark.parametrize(("nodes", "gpus"), [(1, 64), (4, 8), (12, 8), (2, 48)], ids=str)
def test_gangs_within_the_team_gpu_caps_are_admitted(workflow: Obj, nodes: int, gpus: int) -> None:
    job = volcano_job(workflow, nodes=nodes, gpus_per_node=gpus)
    assert admit(job) == []
    assert admit(gang_pod(job, 1 if nodes > 1 else 0)) == []


# ---- denied --------------------------------------------------------------------------------

Mutate = Callable[[Obj], None]


def _pod_spec(obj: Obj) -> Obj:
    """A pod's spec, or the first pod template's of a Job."""
    found: Obj = (
        obj["spec"]["tasks"][0]["template"]["spec"] if obj["kind"] == JOB_KIND else obj["spec"]
    )
    return found


def _container(obj: Obj) -> Obj:
    found: Obj = _pod_spec(obj)["containers"][0]
    return found


def _sc(key: str, value: Any) -> Mutate:
    return lambda o: _container(o)["securityContext"].__setitem__(key, value)


def _in_spec(key: str, value: Any) -> Mutate:
    return lambda o: _pod_spec(o).__setitem__(key, value)


def _init_from(image: str) -> Mutate:
    def add(o: Obj) -> None:
        init = copy.deepcopy(_container(o))
        init.update(name="fetch", image=image)
        _pod_spec(o)["initContainers"] = [init]

    return add


def _gpus(n: int) -> Mutate:
    return lambda o: _container(o)["resources"].__setitem__("limits", {"nvidia.com/gpu": str(n)})


def _add_host_path(o: Obj) -> None:
    _pod_spec(o)["volumes"].append({"name": "root", "hostPath": {"path": "/"}})


def _image(image: str) -> Mutate:
    return lambda o: _container(o).__setitem__("image", image)


REGISTRIES = "(ghcr.io/gangway/, registry.example.com/ml/)"
RESTRICTED: list[tuple[str, Mutate, str]] = [
    ("privileged", _sc("privileged", True), "{c}: spec.containers[*].securityContext.privileged"),
    ("escalation", _sc("allowPrivilegeEscalation", True), "allowPrivilegeEscalation: must be"),
    ("root", _sc("runAsNonRoot", False), "{c}: spec.containers[*].securityContext.runAsNonRoot"),
    ("no-drop", _sc("capabilities", {"drop": ["NET_RAW"]}), "capabilities: must drop ALL"),
    ("cap-add", _sc("capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]}), "add nothing but"),
    ("docker-hub", _image("docker.io/library/python:3"), "{c}: spec.containers[*].image: must"),
    ("registry-prefix", _image("ghcr.io/gangway-fork/x"), f"allowed registry {REGISTRIES}"),
    ("init-image", _init_from("docker.io/busybox"), "container fetch: spec.containers[*].image"),
    ("host-network", _in_spec("hostNetwork", True), "spec.hostNetwork: not allowed"),
    ("host-pid", _in_spec("hostPID", True), "spec.hostPID: not allowed"),
    ("host-ipc", _in_spec("hostIPC", True), "spec.hostIPC: not allowed"),
    ("host-path", _add_host_path, "volume root: spec.volumes[*].hostPath: host paths are not"),
]
KINDS: dict[str, tuple[Callable[[Obj], Obj], str, str]] = {
    "step-pod": (step_pod, "main", "spec."),
    "gang-pod": (lambda wt: gang_pod(volcano_job(wt)), "trainer", "spec."),
    "job": (volcano_job, "trainer", "spec.tasks[*].template.spec."),
}


@pytest.mark.parametrize(
    ("mutate", "expected"), [c[1:] for c in RESTRICTED], ids=[c[0] for c in RESTRICTED]
)
@pytest.mark.parametrize("kind", list(KINDS))
def test_pod_security_and_registries_are_enforced(
    workflow: Obj, kind: str, mutate: Mutate, expected: str
) -> None:
    build, container, path = KINDS[kind]
    obj = build(workflow)
    assert admit(obj) == []
    mutate(obj)
    denied = admit(obj)
    assert len(denied) == 1, denied
    assert expected.format(c=f"container {container}").replace("spec.", path) in denied[0]


def _init_gpus(pod: Obj) -> Obj:
    _init_from("ghcr.io/gangway/fetch")(pod)
    pod["spec"]["initContainers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "65"}}
    return pod


RESEARCH_MAY = "team research may use gangway-normal, gangway-batch"
TEAM_RULES: list[tuple[str, Callable[[Obj], Obj], str]] = [
    (
        "pod-without-queue",
        lambda wt: _drop_queue(step_pod(wt)),
        "metadata.labels[gangway.dev/queue]: missing; a pod of team research names its queue",
    ),
    (
        "pod-wrong-queue",
        lambda wt: step_pod(wt, queue="evals"),
        "metadata.labels[gangway.dev/queue] is evals: must be research, the queue of team research",
    ),
    (
        "gang-pod-wrong-queue",
        # its labels copy the workflow's queue; the Job was sent to another
        lambda wt: gang_pod(_spec_queue(volcano_job(wt), "evals")),
        "metadata.labels[volcano.sh/queue-name] is evals: must be research",
    ),
    (
        "pod-queue-annotation",
        lambda wt: _annotate(step_pod(wt), POD_QUEUE_ANNOTATIONS[1], "evals"),
        "metadata.annotations[scheduling.volcano.sh/queue-name] is evals",
    ),
    (
        "pod-priority",
        lambda wt: _set(step_pod(wt), "priorityClassName", "gangway-critical"),
        f"spec.priorityClassName is gangway-critical: {RESEARCH_MAY}",
    ),
    (
        "pod-gpus",
        lambda wt: _with(step_pod(wt), _gpus(65)),
        "spec.containers[*].resources.limits[nvidia.com/gpu]: a pod asks for 65 GPUs; "
        "a pod of team research may use at most 64",
    ),
    ("pod-init-gpus", lambda wt: _init_gpus(step_pod(wt)), "may use at most 64 GPUs"),
    (
        "pod-gpu-containers",
        lambda wt: _many_gpu_containers(step_pod(wt)),
        f"at most {MAX_GPU_PARTS} containers of a pod",
    ),
    (
        "job-wrong-queue",
        lambda wt: _spec_queue(volcano_job(wt), "evals"),
        "spec.queue is evals: must be research, the queue of team research",
    ),
    (
        "job-unset-queue",
        lambda wt: _unset_queue(volcano_job(wt)),
        "spec.queue is unset: must be research",
    ),
    (
        "job-queue-label",
        lambda wt: _label(volcano_job(wt), QUEUE_LABEL, "evals"),
        "metadata.labels[gangway.dev/queue]: must be research",
    ),
    (
        "job-priority",
        lambda wt: volcano_job(wt, priority_class="gangway-critical"),
        f"spec.priorityClassName is gangway-critical: {RESEARCH_MAY}; set the workflow "
        "parameter priority-class",
    ),
    (
        "job-template-priority",
        lambda wt: _with(volcano_job(wt), _in_spec("priorityClassName", "gangway-critical")),
        "spec.tasks[*].template.spec.priorityClassName is gangway-critical",
    ),
    (
        "job-gpus-per-pod",
        lambda wt: volcano_job(wt, nodes=1, gpus_per_node=65),
        "spec.tasks[*].template.spec.containers[*].resources.limits[nvidia.com/gpu]: "
        "a pod asks for 65 GPUs",
    ),
    (
        "job-gpus-in-all",
        lambda wt: volcano_job(wt, nodes=13, gpus_per_node=8),
        "spec.tasks[*].replicas times nvidia.com/gpu per pod: the Job asks for 104 GPUs; "
        "team research may use at most 96",
    ),
]


def _with(obj: Obj, *mutations: Mutate) -> Obj:
    for m in mutations:
        m(obj)
    return obj


def _drop_queue(pod: Obj) -> Obj:
    del pod["metadata"]["labels"][QUEUE_LABEL]
    return pod


def _annotate(obj: Obj, key: str, value: str) -> Obj:
    obj["metadata"].setdefault("annotations", {})[key] = value
    return obj


def _label(obj: Obj, key: str, value: str) -> Obj:
    obj["metadata"].setdefault("labels", {})[key] = value
    return obj


def _set(obj: Obj, key: str, value: Any) -> Obj:
    obj["spec"][key] = value
    return obj


def _unset_queue(job: Obj) -> Obj:
    del job["spec"]["queue"]
    return job


def _many_gpu_containers(pod: Obj) -> Obj:
    main = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [
        {**main, "name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        for i in range(MAX_GPU_PARTS + 1)
    ]
    return pod


@pytest.mark.parametrize(
    ("build", "expected"), [c[1:] for c in TEAM_RULES], ids=[c[0] for c in TEAM_RULES]
)
def test_team_rules_are_enforced(workflow: Obj, build: Callable[[Obj], Obj], expected: str) -> None:
    denied = admit(build(workflow))
    assert len(denied) == 1, denied
    assert expected in denied[0]


def test_a_team_namespace_takes_only_its_own_values(workflow: Obj) -> None:
    pod = step_pod(workflow)
    assert admit(pod, TEAMS["evals"]) == [
        "metadata.labels[gangway.dev/queue] is research: must be evals, the queue of team "
        "evals; submit to it"
    ]
    denied = admit(volcano_job(workflow), TEAMS["platform"])
    assert [m.split(":")[0] for m in denied] == [
        "spec.queue is research",
        "metadata.labels[gangway.dev/queue]",
        "spec.priorityClassName is gangway-normal",
    ]


def _config(**changes: Any) -> PlatformConfig:
    raw = yaml.safe_load(EXAMPLE.read_text())
    for path, value in changes.items():
        *parents, last = path.split("__")
        at = raw
        for p in parents:
            at = at[p]
        if value is None:
            del at[last]
        else:
            at[last] = value
    return PlatformConfig.model_validate(raw)


def test_gpu_caps_come_from_the_team_its_org_or_the_clusters() -> None:
    assert [gpu_caps(CFG, t) for t in TEAMS.values()] == [(64, 96), (32, 64), (16, 16)]
    org_cap = _config(
        orgs__frontier__teams__research__capability=None,
        orgs__frontier__capability={"gpu": {"H100": 40}},
    )
    assert gpu_caps(org_cap, org_cap.team_views()["research"]) == (40, 40)
    neither = _config(
        orgs__frontier__teams__research__capability=None, orgs__frontier__capability=None
    )
    by_cluster = (64, 64 + 32 + 32)  # the most any cluster has: H100 64, A100 32, L4 32
    assert gpu_caps(neither, neither.team_views()["research"]) == by_cluster
    cpu_only = _config(teams__platform__capability={"cpu": 8})
    assert gpu_caps(cpu_only, cpu_only.team_views()["platform"]) == by_cluster


def test_a_missing_priority_class_is_allowed_only_where_priority_0_is_within_the_team(
    workflow: Obj,
) -> None:
    pod = step_pod(workflow)
    assert "priorityClassName" not in pod["spec"]
    assert admit(pod) == []
    classes = {
        **yaml.safe_load(EXAMPLE.read_text())["priority_classes"],
        "scavenger": {"value": -10},
    }
    cfg = _config(
        priority_classes=classes, orgs__frontier__teams__research__priority_classes=["scavenger"]
    )
    denied = admit(pod, cfg.team_views()["research"], cfg)
    assert denied == [
        "spec.priorityClassName: team research may use scavenger; set the workflow parameter "
        "priority-class to one of them"
    ]
    assert (
        admit(_set(pod, "priorityClassName", "scavenger"), cfg.team_views()["research"], cfg) == []
    )
    job = volcano_job(workflow, priority_class="scavenger")
    assert admit(job, cfg.team_views()["research"], cfg) == []
    del job["spec"]["priorityClassName"]
    assert len(admit(job, cfg.team_views()["research"], cfg)) == 1


# ---- the objects -----------------------------------------------------------------------------


def test_bindings_select_the_team_namespaces() -> None:
    objects = policies(CFG)
    for team in TEAMS.values():
        assert bound(objects, namespace_labels(team)) == [
            "gangway-restricted-pods",
            "gangway-restricted-jobs",
            f"gangway-team-{team.name}-pods",
            f"gangway-team-{team.name}-jobs",
        ]
    assert bound(objects, {"kubernetes.io/metadata.name": "default"}) == []
    assert bound(objects, {TEAM_LABEL: "nobody"}) == [
        "gangway-restricted-pods",
        "gangway-restricted-jobs",
    ]


def test_objects_are_well_formed_and_deterministic() -> None:
    objects = policies(CFG)
    assert objects == policies(load_config(EXAMPLE))
    kinds = [o["kind"] for o in objects]
    assert kinds == [POLICY] * (len(kinds) // 2) + [BINDING] * (len(kinds) // 2)
    names = [o["metadata"]["name"] for o in objects]
    assert names[: len(names) // 2] == names[len(names) // 2 :]
    assert len(set(names)) == len(names) // 2
    for o in objects:
        assert o["apiVersion"] == API_VERSION
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", o["metadata"]["name"])
        if o["kind"] == BINDING:
            assert o["spec"]["validationActions"] == ["Deny"]
            assert o["spec"]["policyName"] == o["metadata"]["name"]
            continue
        assert o["spec"]["failurePolicy"] == "Fail"
        for rule in o["spec"]["validations"]:
            assert rule["message"] and "\n" not in rule["message"], rule
    assert [_round_trip(o) for o in objects] == objects


def _round_trip(obj: Obj) -> Any:
    """``obj`` through the Kubernetes client's typed models (the API's schema): a wrong type
    or a missing required field is refused, an unknown field dropped."""
    from kubernetes import client

    model = getattr(client, f"V1{obj['kind']}")
    return _without_none(model.from_dict(obj).to_dict(serialize=True))


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _expressions(objects: list[Obj]) -> list[str]:
    spec = [o["spec"] for o in objects if o["kind"] == POLICY]
    return [
        e
        for s in spec
        for e in [
            *(v["expression"] for v in s.get("variables", [])),
            *(
                r[k]
                for r in s["validations"]
                for k in ("expression", "messageExpression")
                if k in r
            ),
        ]
    ]


def test_every_expression_compiles() -> None:
    for expression in _expressions(policies(CFG)):
        _program(expression)


def test_has_is_guarded_as_kubernetes_needs() -> None:
    """cel-python's ``has(a.b.c)`` is false when ``a.b`` is missing; Kubernetes' (cel-go)
    is an error. Every nested ``has`` is preceded by one of its parent, unless the parent
    always exists (``object.spec``, ``object.metadata``) or is a comprehension variable."""
    always = {"object.spec", "object.metadata"}
    for expression in _expressions(policies(CFG)):
        for m in re.finditer(r"has\(([\w.]+)\.\w+\)", expression):
            parent = m.group(1)
            if "." not in parent or parent in always:
                continue
            assert f"has({parent})" in expression[: m.start()], (parent, expression)


# ---- NCCL over RDMA: IPC_LOCK in a gang pod's container with an RDMA device -----------------

RDMA_DEVICE = "rdma/hca_shared_devices_a"
CAPABILITIES = "securityContext.capabilities: must drop ALL and add nothing but NET_BIND_SERVICE"


def volcano_pod(job: Obj, task: int = 0) -> Obj:
    """:func:`gang_pod` with the owner reference Volcano's job controller gives every pod of a
    Job (``metav1.NewControllerRef``: the Job, as controller)."""
    pod = gang_pod(job, task)
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": JOB_API_VERSION,
            "kind": JOB_KIND,
            "name": job["metadata"]["name"],
            "uid": "j1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return pod


def _rdma(resource: str = RDMA_DEVICE, n: str = "1") -> Mutate:
    def add(o: Obj) -> None:
        _container(o).setdefault("resources", {}).setdefault("limits", {})[resource] = n

    return add


def _add(*capabilities: str) -> Mutate:
    return lambda o: _container(o)["securityContext"]["capabilities"].__setitem__(
        "add", list(capabilities)
    )


def _owner(**changes: Any) -> Mutate:
    return lambda o: o["metadata"]["ownerReferences"][0].update(changes)


RDMA_BUILDS: dict[str, Callable[[Obj], Obj]] = {
    "job": volcano_job,
    "gang-pod": lambda wt: volcano_pod(volcano_job(wt)),
    "step-pod": step_pod,
    "labelled-gang-pod": lambda wt: gang_pod(volcano_job(wt)),  # Volcano's labels, no owner
}
RDMA_ADMITTED: list[tuple[str, str, list[Mutate]]] = [
    ("job-rdma-ipc-lock", "job", [_rdma(), _add("IPC_LOCK")]),
    ("gang-pod-rdma-ipc-lock", "gang-pod", [_rdma(), _add("IPC_LOCK")]),
    ("gang-pod-hostdev", "gang-pod", [_rdma("nvidia.com/hostdev", "2"), _add("IPC_LOCK")]),
    ("gang-pod-and-net-bind", "gang-pod", [_rdma(), _add("IPC_LOCK", "NET_BIND_SERVICE")]),
]
RDMA_DENIED: list[tuple[str, str, list[Mutate], str]] = [
    ("job-without-rdma", "job", [_add("IPC_LOCK")], CAPABILITIES),
    ("gang-pod-without-rdma", "gang-pod", [_add("IPC_LOCK")], CAPABILITIES),
    ("gang-pod-zero-rdma", "gang-pod", [_rdma(n="0"), _add("IPC_LOCK")], CAPABILITIES),
    ("gpu-is-no-rdma", "gang-pod", [_rdma("nvidia.com/gpu"), _add("IPC_LOCK")], CAPABILITIES),
    ("step-pod-with-rdma", "step-pod", [_rdma(), _add("IPC_LOCK")], CAPABILITIES),
    ("labels-are-not-enough", "labelled-gang-pod", [_rdma(), _add("IPC_LOCK")], CAPABILITIES),
    (
        "owned-by-a-kubernetes-job",
        "gang-pod",
        [_owner(apiVersion="batch/v1"), _rdma(), _add("IPC_LOCK")],
        CAPABILITIES,
    ),
    (
        "owned-not-controlled",
        "gang-pod",
        [_owner(controller=False), _rdma(), _add("IPC_LOCK")],
        CAPABILITIES,
    ),
    ("gang-pod-rdma-sys-admin", "gang-pod", [_rdma(), _add("SYS_ADMIN")], CAPABILITIES),
    ("job-rdma-sys-admin", "job", [_rdma(), _add("IPC_LOCK", "SYS_ADMIN")], CAPABILITIES),
    (
        "rdma-privileged",
        "gang-pod",
        [_rdma(), _add("IPC_LOCK"), _sc("privileged", True)],
        "securityContext.privileged: privileged containers are not allowed",
    ),
    (
        "rdma-host-network",
        "job",
        [_rdma(), _add("IPC_LOCK"), _in_spec("hostNetwork", True)],
        "hostNetwork: not allowed",
    ),
    ("rdma-host-path", "gang-pod", [_rdma(), _add("IPC_LOCK"), _add_host_path], "hostPath"),
]


@pytest.mark.parametrize(
    ("build", "mutations"), [c[1:] for c in RDMA_ADMITTED], ids=[c[0] for c in RDMA_ADMITTED]
)
def test_an_rdma_gang_pod_may_add_ipc_lock(
    workflow: Obj, build: str, mutations: list[Mutate]
) -> None:
    assert admit(_with(RDMA_BUILDS[build](workflow), *mutations)) == []


@pytest.mark.parametrize(
    ("build", "mutations", "expected"),
    [c[1:] for c in RDMA_DENIED],
    ids=[c[0] for c in RDMA_DENIED],
)
def test_nothing_else_adds_ipc_lock_and_rdma_gangs_stay_restricted(
    workflow: Obj, build: str, mutations: list[Mutate], expected: str
) -> None:
    obj = RDMA_BUILDS[build](workflow)
    assert admit(obj) == []
    denied = admit(_with(obj, *mutations))
    assert len(denied) == 1, denied
    assert expected in denied[0]
    if expected == CAPABILITIES:
        assert "or IPC_LOCK in a gang pod, in a container with an RDMA device" in denied[0]


# ---- every container of the pod Argo makes of a template ------------------------------------


def argo_pod(wt: Obj, template: Obj, defaults: Obj | None = None) -> Obj:
    """The pod Argo makes of ``template`` (a step's pod of the reference pipeline otherwise):
    each container :func:`gangway.lint.pods.pod_containers` finds — ``spec.templateDefaults``
    merged in — its main container named ``main``, its init containers in ``initContainers``,
    the rest (sidecars, a containerSet's) in ``containers``."""
    from gangway.lint.pods import pod_containers

    pod = step_pod(wt)
    inits: list[Obj] = []
    pod["spec"]["containers"] = []
    for pc in pod_containers(template, "t", defaults or {}, "d"):
        c = {**pc.container, "name": "main"} if pc.main else dict(pc.container)
        (inits if ".initContainers[" in pc.path else pod["spec"]["containers"]).append(c)
    if inits:
        pod["spec"]["initContainers"] = inits
    return pod


def _named(c: Obj, name: str, **security: Any) -> Obj:
    return {**copy.deepcopy(c), "name": name} | (
        {"securityContext": {**c["securityContext"], **security}} if security else {}
    )


def _main(wt: Obj) -> Obj:
    return _container(step_pod(wt))


PRIVILEGED_IN: dict[str, Callable[[Obj, bool], tuple[Obj, Obj | None, str]]] = {
    "sidecar": lambda wt, bad: (
        {"container": _main(wt), "sidecars": [_named(_main(wt), "proxy", privileged=bad)]},
        None,
        "proxy",
    ),
    "init-container": lambda wt, bad: (
        {"container": _main(wt), "initContainers": [_named(_main(wt), "fetch", privileged=bad)]},
        None,
        "fetch",
    ),
    "container-set": lambda wt, bad: (
        {
            "containerSet": {
                "containers": [_named(_main(wt), "a"), _named(_main(wt), "b", privileged=bad)]
            }
        },
        None,
        "b",
    ),
    # a DAG task's or a step's ``inline:`` template makes its pod as a named one does
    "inline-template": lambda wt, bad: (
        {"container": _named(_main(wt), "x", privileged=bad)},
        None,
        "main",
    ),
    "template-defaults": lambda wt, bad: (
        {"container": {k: v for k, v in _main(wt).items() if k != "securityContext"}},
        {"container": {"securityContext": {**_main(wt)["securityContext"], "privileged": bad}}},
        "main",
    ),
}


@pytest.mark.parametrize("where", list(PRIVILEGED_IN))
def test_a_privileged_container_anywhere_in_an_argo_pod_is_denied(
    workflow: Obj, where: str
) -> None:
    """A sidecar, an init container, a containerSet's, an inline template's and one whose
    securityContext comes from templateDefaults: all in the pod the policy sees."""
    template, defaults, name = PRIVILEGED_IN[where](workflow, False)
    assert admit(argo_pod(workflow, template, defaults)) == []
    template, defaults, name = PRIVILEGED_IN[where](workflow, True)
    denied = admit(argo_pod(workflow, template, defaults))
    assert len(denied) == 1, denied
    assert denied[0].startswith(f"container {name}: spec.containers[*].securityContext.privileged")


def test_a_privileged_debug_container_is_denied(workflow: Obj) -> None:
    """``kubectl debug`` adds an ephemeral container through a subresource the policy matches."""
    restricted = next(
        p for p in policies(CFG) if p["metadata"]["name"] == "gangway-restricted-pods"
    )
    assert (
        "pods/ephemeralcontainers"
        in restricted["spec"]["matchConstraints"]["resourceRules"][0]["resources"]
    )
    pod = step_pod(workflow)
    pod["spec"]["ephemeralContainers"] = [_named(_container(pod), "debug")]
    assert admit(pod) == []
    pod["spec"]["ephemeralContainers"][0]["securityContext"]["privileged"] = True
    denied = admit(pod)
    assert len(denied) == 1 and denied[0].startswith("container debug: "), denied
