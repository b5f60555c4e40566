"""GPU pod specs as the pipelines compile them: the GPU product selected on GPU feature
discovery's label, the GPU taint tolerated by GPU pods only, memory sized from the model
preset; and every way to get that wrong is a compile error naming the task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.interfaces import EVAL_MEMORY, EVALUATE, TRAIN, TRAIN_MEMORY
from gangway.errors import PermanentError
from gangway.units import GPU_PRODUCT_LABEL, GPU_RESOURCE, GPU_TAINT
from gangway.workflows.compiler import compile_pipeline
from gangway.workflows.gpu_pods import gpu_pods
from tests.helpers import REPO, beside_pipelines

CPU = REPO / "pipelines" / "train_eval_infer.py"
GPU = REPO / "pipelines" / "train_eval_infer_gpu.py"


def _templates(path: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in compile_pipeline(path)["spec"]["templates"]}


def _gang_pod(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    job = yaml.safe_load(
        templates["train"]["resource"]["manifest"].replace("{{", "").replace("}}", "")
    )
    pod: dict[str, Any] = job["spec"]["tasks"][0]["template"]["spec"]
    return pod


def _tolerates_gpu_taint(pod: dict[str, Any]) -> bool:
    return any(t.get("key") == GPU_TAINT for t in pod.get("tolerations") or [])


def test_a_gpu_gang_selects_its_product_and_tolerates_the_gpu_taint() -> None:
    pod = _gang_pod(_templates(GPU))
    assert pod["nodeSelector"] == {GPU_PRODUCT_LABEL: "inputs.parameters.gpu-product"}
    assert _tolerates_gpu_taint(pod)
    (c,) = pod["containers"]
    limits = c["resources"]["limits"]
    assert limits[GPU_RESOURCE] == "inputs.parameters.gpus-per-node"
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["GANGWAY_GPUS"] == "inputs.parameters.gpus-per-node"  # checked against CUDA
    # One process per GPU, each holding the gpu preset's weights and AdamW state: the memory
    # is an Argo expression over the processes a pod runs, filled when the workflow runs.
    per_process = int(TRAIN_MEMORY["gpu"].removesuffix("Gi"))
    memory = limits["memory"]
    assert memory == c["resources"]["requests"]["memory"]
    assert memory == f'=asInt(inputs.parameters["procs-per-node"]) * {per_process}Gi'


@pytest.mark.parametrize("gpus", ["1", "8"])
def test_a_gpu_gangs_memory_follows_its_gpus_as_argo_fills_it(gpus: str) -> None:
    """One process per GPU: ``-p gpus-per-node`` sets both, and the memory with them."""
    from gangway.scheduling.workload import gang_workloads

    wt = compile_pipeline(GPU)
    (w,) = gang_workloads(wt, {"gpus-per-node": gpus, "nodes": "2"})
    per_process = int(TRAIN_MEMORY["gpu"].removesuffix("Gi"))
    assert w.per_pod.gpus == int(gpus)
    assert w.per_pod.memory == int(gpus) * per_process * 2**30


def test_a_cpu_gang_asks_for_no_gpu_and_does_not_tolerate_the_taint() -> None:
    pod = _gang_pod(_templates(CPU))
    assert "nodeSelector" not in pod and not _tolerates_gpu_taint(pod)
    (c,) = pod["containers"]
    assert GPU_RESOURCE not in c["resources"]["limits"]
    assert GPU_RESOURCE not in c["resources"].get("requests", {})


@pytest.mark.parametrize("name", ["evaluate", "infer"])
def test_evaluation_and_inference_pods_follow_the_pipelines_device(name: str) -> None:
    gpu, cpu = _templates(GPU)[name], _templates(CPU)[name]
    assert gpu["nodeSelector"] == {GPU_PRODUCT_LABEL: "{{workflow.parameters.gpu-product}}"}
    assert [t["key"] for t in gpu["tolerations"]] == [GPU_TAINT]
    res = gpu["container"]["resources"]
    assert res["limits"][GPU_RESOURCE] == "1" and res["limits"]["memory"] == EVAL_MEMORY["gpu"]
    assert {"name": "GANGWAY_GPUS", "value": "1"} in gpu["container"]["env"]
    # The fp32 gpu preset does not fit the old 2 Gi: sized for it (7 Gi), no OOM-kill loop.
    assert int(EVAL_MEMORY["gpu"].removesuffix("Gi")) * 2**30 > 2 * 4 * 680_000_000
    assert "nodeSelector" not in cpu and "tolerations" not in cpu
    assert GPU_RESOURCE not in cpu["container"]["resources"]["limits"]
    assert cpu["container"]["resources"]["limits"]["memory"] == EVAL_MEMORY["small"]


def test_no_other_pod_tolerates_the_gpu_taint() -> None:
    for path in (CPU, GPU):
        for name, t in _templates(path).items():
            wants = GPU_RESOURCE in ((t.get("container") or {}).get("resources") or {}).get(
                "limits", {}
            )
            assert bool(t.get("tolerations")) == wants, (path.name, name)


@pytest.mark.parametrize(
    ("gpus", "product", "says"),
    [
        (8, None, "8 GPU(s) but no gpu_product"),
        ("{{inputs.parameters.gpus-per-node}}", None, "no gpu_product"),
        (0, "NVIDIA-H200", "with 0 GPUs: give 1 or more"),
        (1, " ", "gpu_product is empty"),
    ],
)
def test_gpus_without_a_product_and_the_like_are_compile_errors(
    gpus: Any, product: str | None, says: str
) -> None:
    with pytest.raises(PermanentError, match="task 'train'") as e:
        gpu_pods(gpus, product, where="task 'train'")
    assert says in str(e.value)


def test_gpu_pods_of_a_cpu_step_are_empty() -> None:
    pods = gpu_pods(0, None, where="x")
    assert pods.limits == {} and pods.node_selector is None and pods.tolerations is None


def _pipeline_with(tmp_path: Path, call: str) -> Path:
    """A one-task pipeline beside the reference ones (so it imports the same way)."""
    text = f"""
from typing import Literal
from hera.workflows import DAG
from pydantic import Field
from components.interfaces import EVALUATE, TRAIN
from gangway.params import PipelineParams
from gangway.pipeline import pipeline
from gangway.wiring import RUN, STORAGE_ROOT, Pod, parameters

class Params(PipelineParams):
    model: Literal["tiny", "gpu"] = Field("tiny")
    steps: int = Field(10, ge=1)

p = parameters(Params)
with pipeline("t", team="research", title="t", description="t", parameters=Params) as w, DAG(
    name="main"
):
    {call}
"""
    path = beside_pipelines("pods", tmp_path)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ('TRAIN(corpus=STORAGE_ROOT / "c", checkpoints=RUN / "k", gpus_per_node=8)',
         "gang step 'train': 8 GPU(s) but no gpu_product"),
        ('EVALUATE(corpus=STORAGE_ROOT / "c", pod=Pod(gpus=1))',
         "step 'evaluate': 1 GPU(s) but no gpu_product"),
        ('EVALUATE(corpus=STORAGE_ROOT / "c", pod=Pod(size_for="huge"))',
         "task 'evaluate': size_for: unknown model preset 'huge'; choose from tiny, small, gpu"),
        ('EVALUATE(corpus=STORAGE_ROOT / "c", pod=Pod(size_for=p.steps))',
         "size_for takes a value or a parameter typed Literal[...]"),
        ('EVALUATE(corpus=STORAGE_ROOT / "c", pod="big")', "pod= takes a gangway.wiring.Pod"),
        ('TRAIN(corpus=STORAGE_ROOT / "c", checkpoints=RUN / "k", pod=Pod(gpus=1))',
         "a gang's GPUs are gpus_per_node= and gpu_product="),
    ],
    ids=["gang-gpus-no-product", "step-gpus-no-product", "unknown-preset", "size-for-int",
         "pod-not-a-pod", "gang-pod-gpus"],
)  # fmt: skip
def test_pod_mistakes_are_compile_errors_naming_the_task(
    tmp_path: Path, call: str, says: str
) -> None:
    path = _pipeline_with(tmp_path, call)
    try:
        with pytest.raises(PermanentError) as e:
            compile_pipeline(path)
    finally:
        path.unlink()
    assert says in str(e.value), str(e.value)


def test_a_literal_parameter_sizes_the_pod_for_its_largest_preset(tmp_path: Path) -> None:
    path = _pipeline_with(
        tmp_path, 'EVALUATE(corpus=STORAGE_ROOT / "c", pod=Pod(size_for=p.model))'
    )
    try:
        templates = {t["name"]: t for t in compile_pipeline(path)["spec"]["templates"]}
    finally:
        path.unlink()
    assert templates["evaluate"]["container"]["resources"]["requests"]["memory"] == "7Gi"
    assert EVALUATE.memory_for is not None and TRAIN.memory_for is not None
