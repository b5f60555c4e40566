"""GPU nodes and RDMA gangs in ``gangway lint`` (docs/gpu-clusters.md): only GPU pods tolerate
the GPU taint; a GPU product selector names a product (empty matches no node; one the platform
config does not know is a warning); IPC_LOCK is the one capability beyond Pod Security
"restricted", for a gang pod's container with an RDMA device. Every rule sees the values that
will be submitted: the defaults, and ``-p`` values (``check_values``, ``gangway lint -p``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, load_config
from gangway.lint import CrdSchemas, lint_manifest
from gangway.lint.platform_rules import known_gpu_products
from gangway.lint.values import check_values
from tests.helpers import gangway

Obj = dict[str, Any]
H100 = "NVIDIA-H100-80GB-HBM3"
"""A product the example platform config knows (cluster us-east's H100s)."""
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RDMA = "rdma/hca_shared_devices_a"
STEP = "WorkflowTemplate/gpu-rules"
GANG = "Job in template train"
STEP_AT = "spec.templates[1]"
GANG_AT = "spec.tasks[0].template.spec"
TAINT = "tolerates the GPU taint but requests no GPUs: it could occupy a GPU node"


class Pod:
    """A test pod: by default a GPU pod done right (GPUs of the workflow's product, the GPU
    toleration, Pod Security restricted); each method changes one thing. Its GPUs unless
    given: 1 in a container step (Argo's CRD schema takes no placeholder for a quantity
    there), the ``gpus`` parameter in a gang pod (its manifest is text)."""

    def __init__(self) -> None:
        self.container: Obj = {
            "name": "main",
            "image": "ghcr.io/gangway/gangway:1",
            "command": ["python", "-c", "pass"],
            "resources": {"limits": {}},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
        self.spec: Obj = {
            "nodeSelector": {"nvidia.com/gpu.product": "{{workflow.parameters.gpu-product}}"},
            "tolerations": [dict(GPU_TOLERATION)],
        }

    def gpus(self, n: str) -> Pod:
        self.container["resources"]["limits"]["nvidia.com/gpu"] = n
        return self

    def limit(self, resource: str, n: str) -> Pod:
        self.container["resources"]["limits"][resource] = n
        return self

    def product(self, value: str | None) -> Pod:
        if value is None:
            del self.spec["nodeSelector"]
        else:
            self.spec["nodeSelector"] = {"nvidia.com/gpu.product": value}
        return self

    def tolerations(self, *tolerations: Obj) -> Pod:
        self.spec["tolerations"] = list(tolerations)
        return self

    def add(self, *capabilities: str) -> Pod:
        self.container["securityContext"]["capabilities"]["add"] = list(capabilities)
        return self

    def privileged(self) -> Pod:
        self.container["securityContext"]["privileged"] = True
        return self

    def set(self, key: str, value: Any) -> Pod:
        self.spec[key] = value
        return self


def workflow(step: Pod | None = None, gang: Pod | None = None, *, product: str = H100) -> Obj:
    """A WorkflowTemplate with a container step and a gang step (a Volcano Job of 2 pods, its
    manifest text with placeholders as Argo fills them), both from :class:`Pod` builders;
    parameters ``gpus`` (1) and ``gpu-product`` (``product``)."""
    step, gang = step or Pod(), gang or Pod()
    values = {"gpus": "1", "gpu-product": product}
    gang_container = copy.deepcopy(gang.container)
    gang_container["name"] = "trainer"
    gang_container["resources"]["limits"].setdefault("nvidia.com/gpu", "{{inputs.parameters.gpus}}")
    step_container = copy.deepcopy(step.container)
    step_container["resources"]["limits"].setdefault("nvidia.com/gpu", "1")
    pod_spec = {"restartPolicy": "Never", **copy.deepcopy(gang.spec)}
    pod_spec["containers"] = [gang_container]
    pod_spec["securityContext"] = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"generateName": "{{workflow.name}}-train-"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 2,
            "queue": "research",
            "tasks": [
                {
                    "name": task,
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
                        "spec": copy.deepcopy(pod_spec),
                    },
                }
                for task in ("master", "worker")
            ],
        },
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "gpu-rules"},
        "spec": {
            "entrypoint": "main",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "arguments": {"parameters": [{"name": k, "value": v} for k, v in values.items()]},
            "templates": [
                {
                    "name": "main",
                    "dag": {
                        "tasks": [
                            {"name": "step", "template": "step"},
                            {
                                "name": "train",
                                "template": "train",
                                "arguments": {
                                    "parameters": [
                                        {"name": "gpus", "value": "{{workflow.parameters.gpus}}"}
                                    ]
                                },
                            },
                        ]
                    },
                },
                {"name": "step", "container": step_container, **step.spec},
                {
                    "name": "train",
                    "inputs": {"parameters": [{"name": "gpus"}]},
                    "resource": {
                        "action": "create",
                        "setOwnerReference": True,
                        "successCondition": "status.state.phase == Completed",
                        "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
                        "manifest": yaml.safe_dump(job, sort_keys=False),
                    },
                },
            ],
        },
    }


def _found(obj: Obj, severity: str = "error") -> list[tuple[str, str, str]]:
    return [(f.obj, f.path, f.message) for f in lint_manifest(obj, None) if f.severity == severity]


def _has(found: list[tuple[str, str, str]], obj: str, path: str, text: str) -> bool:
    return any(o == obj and p == path and text in m for o, p, m in found)


def test_a_gpu_workflow_done_right_lints_clean(schemas: CrdSchemas) -> None:
    """The builders' defaults: valid against the CRDs, no error, no warning."""
    findings = lint_manifest(workflow(), schemas)
    assert findings == [], "\n".join(map(str, findings))


def test_the_products_the_config_knows() -> None:
    assert known_gpu_products(load_config(EXAMPLE)) == {
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA-A100-SXM4-80GB",
        "NVIDIA-A100-SXM4-40GB",
        "NVIDIA-L4",
    }


# ---- only GPU pods tolerate the GPU taint -----------------------------------------------------

EVERY_TAINT = {"operator": "Exists"}
TAINT_CASES = [
    pytest.param(Pod().gpus("0"), None, [(STEP, f"{STEP_AT}.tolerations[0]")], id="cpu-step"),
    pytest.param(
        None,
        Pod().gpus("0"),
        [(GANG, f"{GANG_AT}.tolerations[0]"), (GANG, "spec.tasks[1].template.spec.tolerations[0]")],
        id="cpu-gang",
    ),
    pytest.param(
        Pod().gpus("0").product(None).tolerations({"key": "dedicated"}, EVERY_TAINT),
        None,
        [(STEP, f"{STEP_AT}.tolerations[1]")],
        id="cpu-step-tolerating-every-taint",
    ),
    pytest.param(
        Pod().product(None).tolerations(GPU_TOLERATION).gpus("0").limit("cpu", "2"),
        None,
        [(STEP, f"{STEP_AT}.tolerations[0]")],
        id="cpu-step-without-gpu-selector",
    ),
]


@pytest.mark.parametrize(("step", "gang", "expected"), TAINT_CASES)
def test_a_pod_that_tolerates_the_gpu_taint_asks_for_gpus(
    step: Pod | None, gang: Pod | None, expected: list[tuple[str, str]]
) -> None:
    errors = _found(workflow(step, gang))
    for obj, path in expected:
        assert _has(errors, obj, path, TAINT), errors
    assert len([e for e in errors if TAINT in e[2]]) == len(expected), errors


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(Pod(), id="gpu-pod"),
        pytest.param(Pod().gpus("0").product(None).tolerations(), id="cpu-pod-no-toleration"),
        pytest.param(
            Pod().gpus("{{tasks.size.outputs.parameters.gpus}}"), id="gpus-known-only-at-run-time"
        ),
        pytest.param(
            Pod().gpus("0").product(None).tolerations({"key": "dedicated", "operator": "Exists"}),
            id="cpu-pod-other-taint",
        ),
    ],
)
def test_pods_that_may_tolerate_the_gpu_taint(pod: Pod) -> None:
    errors = _found(workflow(pod, copy.deepcopy(pod)))
    assert [e for e in errors if TAINT in e[2]] == []


def test_the_workflow_tolerations_apply_to_a_template_without_its_own() -> None:
    """Argo gives a pod the template's tolerations, else the workflow's (never both)."""
    wt = workflow(Pod().gpus("0").product(None).tolerations())
    step = wt["spec"]["templates"][1]
    del step["tolerations"]
    wt["spec"]["tolerations"] = [GPU_TOLERATION]
    assert _has(_found(wt), STEP, f"{STEP_AT}.tolerations[0]", TAINT)
    step["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    assert not _has(_found(wt), STEP, f"{STEP_AT}.tolerations[0]", TAINT)


# ---- the GPU product a GPU pod selects ----------------------------------------------------------

SELECTOR = "nodeSelector.nvidia.com/gpu.product"


@pytest.mark.parametrize(("where", "obj"), [(STEP_AT, STEP), (GANG_AT, GANG)], ids=["step", "gang"])
def test_an_empty_gpu_product_matches_no_node(where: str, obj: str) -> None:
    errors = _found(workflow(product=""))
    assert _has(errors, obj, f"{where}.{SELECTOR}", "is empty: an empty value matches no node")
    assert _has(errors, obj, f"{where}.{SELECTOR}", H100)  # what it could be


def test_an_empty_gpu_product_on_a_cpu_pod_says_to_remove_it() -> None:
    errors = _found(workflow(Pod().gpus("0").tolerations().product("")))
    assert _has(errors, STEP, f"{STEP_AT}.{SELECTOR}", "or remove the selector")


def test_a_gpu_product_the_config_does_not_know_is_a_warning() -> None:
    wt = workflow(product="NVIDIA-B200")
    assert _found(wt) == []
    warnings = _found(wt, "warning")
    assert _has(warnings, STEP, f"{STEP_AT}.{SELECTOR}", "'NVIDIA-B200' is not a GPU product")
    assert _has(warnings, GANG, f"{GANG_AT}.{SELECTOR}", "NVIDIA-A100-SXM4-40GB, NVIDIA-A100")


def test_a_gpu_pod_still_selects_a_product() -> None:
    errors = _found(workflow(Pod().product(None)))
    assert _has(errors, STEP, f"{STEP_AT}.nodeSelector", "does not select a GPU type")


def test_a_template_node_selector_replaces_the_workflows() -> None:
    """Argo gives a pod the template's nodeSelector, else the workflow's (never merged)."""
    wt = workflow(Pod().product(None))
    wt["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": H100}
    assert not _has(_found(wt), STEP, f"{STEP_AT}.nodeSelector", "does not select")
    wt["spec"]["templates"][1]["nodeSelector"] = {"disk": "ssd"}
    assert _has(_found(wt), STEP, f"{STEP_AT}.nodeSelector", "does not select")


# ---- IPC_LOCK for NCCL over RDMA: gang pods with an RDMA device only ----------------------------

CAPS = "securityContext.capabilities.add"
RDMA_CASES = [
    pytest.param(
        Pod().add("IPC_LOCK"),
        [(GANG, f"{GANG_AT}.containers[0].{CAPS}", "this container has no RDMA device")],
        id="gang-without-rdma",
    ),
    pytest.param(
        Pod().limit(RDMA, "0").add("IPC_LOCK"),
        [(GANG, f"{GANG_AT}.containers[0].{CAPS}", "IPC_LOCK is allowed only in a gang pod")],
        id="gang-with-zero-rdma",
    ),
    pytest.param(
        Pod().limit(RDMA, "1").add("IPC_LOCK", "SYS_ADMIN"),
        [(GANG, f"{GANG_AT}.containers[0].{CAPS}", "['SYS_ADMIN'] not allowed")],
        id="gang-rdma-sys-admin",
    ),
    pytest.param(
        Pod().limit(RDMA, "1").add("IPC_LOCK").privileged(),
        [(GANG, f"{GANG_AT}.containers[0].securityContext.privileged", "not allowed")],
        id="gang-rdma-privileged",
    ),
    pytest.param(
        Pod().limit(RDMA, "1").add("IPC_LOCK").set("hostNetwork", True),
        [(GANG, f"{GANG_AT}.hostNetwork", "not allowed")],
        id="gang-rdma-host-network",
    ),
    pytest.param(
        Pod()
        .limit(RDMA, "1")
        .add("IPC_LOCK")
        .set("volumes", [{"name": "ib", "hostPath": {"path": "/dev/infiniband"}}]),
        [(GANG, f"{GANG_AT}.volumes[0].hostPath", "hostPath volumes are not allowed")],
        id="gang-rdma-host-path",
    ),
]


@pytest.mark.parametrize(("gang", "expected"), RDMA_CASES)
def test_ipc_lock_is_for_rdma_gang_pods_and_nothing_else_is(
    gang: Pod, expected: list[tuple[str, str, str]]
) -> None:
    errors = _found(workflow(None, gang))
    for obj, path, text in expected:
        assert _has(errors, obj, path, text), errors


@pytest.mark.parametrize("resource", [RDMA, "rdma/rdma_shared_device_a", "nvidia.com/hostdev"])
def test_an_rdma_gang_pod_may_add_ipc_lock(resource: str) -> None:
    wt = workflow(None, Pod().limit(resource, "1").add("IPC_LOCK", "NET_BIND_SERVICE"))
    assert _found(wt) == []
    warnings = _found(wt, "warning")
    assert _has(warnings, GANG, f"{GANG_AT}.containers[0].{CAPS}", "memlock limit raised")


def test_a_step_pod_may_not_add_ipc_lock_even_with_rdma() -> None:
    errors = _found(workflow(Pod().limit(RDMA, "1").add("IPC_LOCK")))
    assert _has(errors, STEP, f"{STEP_AT}.container.{CAPS}", "this is not a gang pod")


# ---- the values that will be submitted -------------------------------------------------------


def _blamed(wt: Obj, **values: str) -> list[tuple[tuple[str, ...], str, str]]:
    return [
        (v.parameters, v.finding.path, v.finding.message)
        for v in check_values(wt, {k.replace("_", "-"): x for k, x in values.items()}, None)
    ]


def test_a_value_that_makes_a_gpu_pod_a_cpu_pod_is_blamed() -> None:
    found = _blamed(workflow(), gpus="0")
    assert {(p, path) for p, path, m in found if TAINT in m} == {
        (("gpus",), f"{GANG_AT}.tolerations[0]"),
        (("gpus",), "spec.tasks[1].template.spec.tolerations[0]"),
    }


def test_an_empty_product_value_is_blamed() -> None:
    found = _blamed(workflow(), gpu_product="")
    assert {(p, path) for p, path, _ in found} == {
        (("gpu-product",), f"{STEP_AT}.{SELECTOR}"),
        (("gpu-product",), f"{GANG_AT}.{SELECTOR}"),
        (("gpu-product",), f"spec.tasks[1].template.spec.{SELECTOR}"),
    }


def _problems(out: str) -> str:
    """The problems of the findings (the lines indented under each), wrapped lines joined
    back."""
    lines = [line for line in out.splitlines() if line.startswith("    ")]
    return " ".join(" ".join(lines).split())


def test_gangway_lint_p_reports_them(schemas: CrdSchemas, tmp_path: Path) -> None:
    f = tmp_path / "gpu.yaml"
    f.write_text(yaml.safe_dump(workflow()))
    bad = gangway("lint", str(f), "-p", "gpus=0", "-p", "gpu-product=NVIDIA-B200")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    problems = _problems(bad.stdout)
    assert f"{TAINT}; remove the toleration (caused by -p gpus)" in problems
    assert "'NVIDIA-B200' is not a GPU product the platform config knows" in problems
    assert "2 error(s), 3 warning(s)" in bad.stdout
