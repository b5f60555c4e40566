"""The reference pipeline: stage → gang-train (Volcano Job) → evaluate → batch inference.

    gangway run pipelines/train_eval_infer.py -p train-steps=100

Steps write under the run's own place (``RUN``), so a retried step finds its earlier work; the
corpus is content-addressed under ``corpora/``. Wiring is checked at compile time. This one
trains on CPUs; ``train_eval_infer_gpu.py`` runs the same :func:`graph` with GPU pods.
"""

from __future__ import annotations

from typing import Any, Literal

from hera.workflows import DAG
from pydantic import Field

from components.interfaces import EVALUATE, INFER, SPLIT, STAGE, TRAIN
from gangway.params import PipelineParams
from gangway.pipeline import pipeline
from gangway.wiring import EACH, RUN, SCRATCH, STORAGE_ROOT, Pod, parameters

DESCRIPTION = (
    "Stages a dataset into a byte-level corpus, trains a GPT-style model as a gang of torchrun "
    "pods (Volcano), scores every checkpoint, and runs batch inference per shard."
)


class Params(PipelineParams):
    source: str = Field("demo", description="the dataset to stage: demo, a path or a URI")
    inputs: str = Field("demo", description="the prompts for batch inference: demo or a URI")
    model: Literal["tiny", "small"] = Field(
        "tiny", description="the model preset (for the gpu preset: train_eval_infer_gpu.py)"
    )
    train_steps: int = Field(300, ge=1, description="optimizer steps")
    checkpoint_every: int = Field(100, ge=1, description="steps between checkpoints")
    log_every: int = Field(10, ge=1, description="steps between logged losses")
    nodes: int = Field(2, ge=1, le=256, description="pods in the training gang")
    procs_per_node: int = Field(1, ge=1, le=64, description="torchrun processes per pod")
    shards: int = Field(4, ge=1, le=1024, description="batch-inference shards")


def graph(
    p: Any, pods: Pod, gpus: dict[str, Any] | None = None, train_pod: Pod | None = None
) -> None:
    """The steps, inside ``with pipeline(...), DAG(name="main")``: ``p`` the parameters,
    ``pods`` the evaluation and inference pods, ``gpus`` the gang's GPUs (``gpus_per_node``,
    ``gpu_product`` and ``procs_per_node``; none: a CPU gang of ``p.procs_per_node`` processes
    a pod) and ``train_pod`` the size of its pods."""
    DEMO, CACHE = STORAGE_ROOT / "demo", SCRATCH / "cache"  # noqa: N806
    stage = STAGE(
        source=p.source,
        demo_root=DEMO,
        workdir=SCRATCH / "work",
        publish_root=STORAGE_ROOT / "corpora",
    )
    split = SPLIT(
        input=p.inputs,
        demo_root=DEMO,
        shards=p.shards,
        out_prefix=RUN / "shards",
        outputs_prefix=RUN / "predictions",
        after=stage,  # the demo inputs are built with the demo dataset
    )
    train = TRAIN(
        corpus=stage.corpus,
        checkpoints=RUN / "checkpoints/train",
        config=p.model,
        steps=p.train_steps,
        checkpoint_every=p.checkpoint_every,
        log_every=p.log_every,
        nodes=p.nodes,
        cache_dir=CACHE,
        pod=train_pod,
        **(gpus or {"procs_per_node": p.procs_per_node}),
    )
    evaluate = EVALUATE(
        corpus=stage.corpus,
        checkpoints=train.checkpoints,
        cache_dir=CACHE,
        pod=pods,
    )
    INFER(
        checkpoint=evaluate.best,
        input=EACH.input,
        output=EACH.output,
        pod=pods,
        over=split.shards,
        cache_dir=CACHE,
    )


p = parameters(Params)

with (
    pipeline(
        "train-eval-infer",
        team="research",
        title="Train, evaluate, infer",
        description=DESCRIPTION,
        parameters=Params,
    ) as w,
    DAG(name="main"),
):
    graph(p, pods=Pod(size_for=p.model))  # memory for the largest preset `model` allows
