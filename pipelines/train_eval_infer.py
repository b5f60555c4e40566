"""The reference pipeline: stage → gang-train (Volcano Job) → evaluate → batch inference.

    gangway compile pipelines/train_eval_infer.py          # the WorkflowTemplate YAML
    gangway run pipelines/train_eval_infer.py -p train-steps=100

Every step writes under ``{storage-root}/runs/{workflow.uid}/``, so a retried step finds its
own earlier work (checkpoints, finished shards); the corpus is content-addressed under
``{storage-root}/corpora/`` and shared by every run on the same data.
"""

from __future__ import annotations

from typing import Literal

from hera.workflows import DAG, Task
from pydantic import Field

from gangway.params import PipelineParams
from gangway.pipeline import OUT_DIR, gang_step, pipeline, step

ROOT = "{{workflow.parameters.storage-root}}"
RUN = f"{ROOT}/runs/{{{{workflow.uid}}}}"
DEMO = f"{ROOT}/demo"
GANG_PARAMS = (
    "model",
    "train-steps",
    "checkpoint-every",
    "log-every",
    "nodes",
    "procs-per-node",
    "gpus-per-node",
)


class Params(PipelineParams):
    source: str = Field("demo", description="the dataset to stage: demo, a path or a URI")
    inputs: str = Field("demo", description="the prompts for batch inference: demo or a URI")
    model: Literal["tiny", "small", "gpu"] = Field("tiny", description="the model preset")
    train_steps: int = Field(300, ge=1, description="optimizer steps")
    checkpoint_every: int = Field(100, ge=1, description="steps between checkpoints")
    log_every: int = Field(10, ge=1, description="steps between logged losses")
    nodes: int = Field(2, ge=1, le=256, description="pods in the training gang")
    procs_per_node: int = Field(1, ge=1, le=64, description="torchrun processes per pod")
    gpus_per_node: int = Field(0, ge=0, le=8, description="GPUs per training pod")
    shards: int = Field(4, ge=1, le=1024, description="batch-inference shards")


with pipeline(
    "train-eval-infer",
    team="research",
    title="Train, evaluate, infer",
    description=(
        "Stages a dataset into a byte-level corpus, trains a GPT-style model as a gang of "
        "torchrun pods (Volcano), scores every checkpoint, and runs batch inference per shard."
    ),
    parameters=Params,
) as w:
    stage = step(
        "stage",
        module="components.staging",
        args=[
            "stage",
            "--source",
            "{{inputs.parameters.source}}",
            "--demo-root",
            DEMO,
            "--workdir",
            "/gangway/work",
            "--publish-root",
            f"{ROOT}/corpora",
            "--digest-out",
            f"{OUT_DIR}/digest",
            "--corpus-out",
            f"{OUT_DIR}/corpus",
        ],
        inputs=["source"],
        outputs=["digest", "corpus"],
    )
    split = step(
        "split",
        module="components.inference",
        args=[
            "split",
            "--input",
            "{{inputs.parameters.inputs}}",
            "--demo-root",
            DEMO,
            "--shards",
            "{{inputs.parameters.shards}}",
            "--out-prefix",
            f"{RUN}/shards",
            "--outputs-prefix",
            f"{RUN}/predictions",
            "--list-out",
            f"{OUT_DIR}/shards",
        ],
        inputs=["inputs", "shards"],
        outputs=["shards"],
    )
    train = gang_step(
        "train",
        module="components.training",
        args=[
            "--data",
            "{{inputs.parameters.corpus}}",
            "--checkpoints",
            f"{RUN}/checkpoints/train",
            "--config",
            "{{inputs.parameters.model}}",
            "--set",
            "steps={{inputs.parameters.train-steps}}",
            "--set",
            "checkpoint_every={{inputs.parameters.checkpoint-every}}",
            "--set",
            "log_every={{inputs.parameters.log-every}}",
            "--cache-dir",
            "/gangway/cache",
        ],
        inputs=["corpus", *GANG_PARAMS],
    )
    evaluate = step(
        "evaluate",
        module="components.evaluation",
        args=[
            "--data",
            "{{inputs.parameters.corpus}}",
            "--checkpoints",
            f"{RUN}/checkpoints/train",
            "--metrics-out",
            f"{RUN}/eval/metrics.json",
            "--best-out",
            f"{OUT_DIR}/best",
            "--cache-dir",
            "/gangway/cache",
        ],
        inputs=["corpus"],
        outputs=["best"],
        kind="compute",
    )
    infer = step(
        "infer",
        module="components.inference",
        args=[
            "run",
            "--checkpoint",
            "{{inputs.parameters.checkpoint}}",
            "--input",
            "{{inputs.parameters.input}}",
            "--output",
            "{{inputs.parameters.output}}",
            "--cache-dir",
            "/gangway/cache",
        ],
        inputs=["checkpoint", "input", "output"],
        kind="compute",
    )

    with DAG(name="main"):
        p = "{{workflow.parameters.%s}}"
        corpus = "{{tasks.stage.outputs.parameters.corpus}}"
        t_stage = Task(name="stage", template=stage, arguments={"source": p % "source"})
        t_split = Task(
            name="split",
            template=split,
            arguments={"inputs": p % "inputs", "shards": p % "shards"},
        )
        t_train = Task(
            name="train",
            template=train,
            arguments={"corpus": corpus, **{k: p % k for k in GANG_PARAMS}},
        )
        t_eval = Task(name="evaluate", template=evaluate, arguments={"corpus": corpus})
        t_infer = Task(
            name="infer",
            template=infer,
            arguments={
                "checkpoint": "{{tasks.evaluate.outputs.parameters.best}}",
                "input": "{{item.input}}",
                "output": "{{item.output}}",
            },
            with_param="{{tasks.split.outputs.parameters.shards}}",
        )
        t_stage >> [t_split, t_train]
        t_train >> t_eval
        t_eval >> t_infer
        t_split >> t_infer

__all__ = ["w"]
