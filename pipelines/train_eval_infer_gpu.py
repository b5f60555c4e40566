"""The reference pipeline on GPUs: the :func:`~pipelines.train_eval_infer.graph` of
``train_eval_infer.py`` with a GPU gang (one torchrun process per GPU) and evaluation and
inference on one GPU each, all on nodes of ``gpu-product``; only these pods tolerate the GPU
nodes' taint.

    gangway submit pipelines/train_eval_infer_gpu.py -p nodes=2 -p gpus-per-node=8

Batch size, learning rate, warm-up, checkpoint interval and retention follow the model preset
(:data:`components.config.TRAIN_PRESETS`); pods are sized for the largest preset allowed.
"""

from __future__ import annotations

from typing import Literal

from hera.workflows import DAG
from pydantic import Field

from gangway.params import PipelineParams
from gangway.pipeline import pipeline
from gangway.wiring import Pod, parameters
from pipelines.train_eval_infer import DESCRIPTION, graph


class Params(PipelineParams):
    source: str = Field("demo", description="the dataset to stage: demo, a path or a URI")
    inputs: str = Field("demo", description="the prompts for batch inference: demo or a URI")
    model: Literal["small", "gpu"] = Field("gpu", description="the model preset")
    train_steps: int = Field(5000, ge=1, description="optimizer steps")
    checkpoint_every: int = Field(
        0, ge=0, description="steps between checkpoints (0: the model preset's, 500 for gpu)"
    )
    log_every: int = Field(0, ge=0, description="steps between logged losses (0: the preset's)")
    nodes: int = Field(1, ge=1, le=256, description="pods in the training gang")
    gpus_per_node: Literal[1, 2, 4, 8] = Field(
        8, description="GPUs per training pod, one torchrun process each"
    )
    gpu_product: str = Field(
        "NVIDIA-H100-80GB-HBM3",
        min_length=1,
        description="the GPU model: the nvidia.com/gpu.product label GPU feature discovery "
        "puts on the nodes, one the platform config lists, e.g. NVIDIA-H100-80GB-HBM3",
    )
    shards: int = Field(8, ge=1, le=1024, description="batch-inference shards")


p = parameters(Params)

with (
    pipeline(
        "train-eval-infer-gpu",
        team="research",
        title="Train, evaluate, infer (GPU)",
        description=DESCRIPTION,
        parameters=Params,
    ) as w,
    DAG(name="main"),
):
    graph(
        p,
        pods=Pod(gpus=1, gpu_product=p.gpu_product, size_for=p.model),
        gpus={
            "gpus_per_node": p.gpus_per_node,
            "procs_per_node": p.gpus_per_node,  # one process per GPU
            "gpu_product": p.gpu_product,
        },
        train_pod=Pod(size_for=p.model),  # per process, times the processes
    )
