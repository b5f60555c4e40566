"""What each component takes and gives back, declared once (:mod:`gangway.step.interface`).

Each component builds its command line from its spec (``SPEC.add_arguments``); a pipeline
calls the spec to make a task, wired and type-checked when it compiles. Light on purpose
(Pydantic only): compiling a pipeline imports this module, not the ML code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from components.sizing import MODEL_PRESETS, eval_memory_gib, train_memory_gib
from gangway.step.caching import Cache, Place, Reads
from gangway.step.interface import (
    CheckpointsUri,
    CheckpointUri,
    CorpusUri,
    Flag,
    GangInputs,
    Inputs,
    NoOutputs,
    Outputs,
    ShardUri,
    StepSpec,
)
from gangway.storage import DEFAULT_WORKERS

__all__ = [
    "DISCOVER",
    "EVALUATE",
    "GATE",
    "INFER",
    "REPORT",
    "SCORE",
    "SPLIT",
    "STAGE",
    "TRAIN",
    "EvalPair",
    "Shard",
]

EVAL_MEMORY = {name: f"{eval_memory_gib(shape)}Gi" for name, shape in MODEL_PRESETS.items()}
"""Model preset → the memory of a pod that loads it to evaluate or infer (``size_for``)."""
TRAIN_MEMORY = {name: f"{train_memory_gib(shape)}Gi" for name, shape in MODEL_PRESETS.items()}
"""Model preset → the memory of one training process (a gang pod holds procs_per_node)."""

CacheDir = Annotated[
    Path | None, Place(), Field(None, description="local cache for fetched data and checkpoints")
]


class StageInputs(Inputs):
    source: Annotated[str, Reads()] = Field(
        description="published dataset URI (file:// or s3://), or 'demo' for the built-in demo "
        "dataset under --demo-root (built there first if missing)"
    )
    demo_root: str | None = Field(None, description="where the demo data lives (with demo)")
    workdir: Annotated[Path, Place()] = Field(description="local working directory")
    publish: str | None = Field(None, description="publish the corpus here for training")
    publish_root: Annotated[str | None, Place()] = Field(
        None,
        description="publish the corpus under ROOT/<digest> (content-addressed, shared by "
        "every run on the same data)",
    )
    val_fraction: float = Field(0.1, gt=0, lt=1, description="share of documents held out")
    workers: int = Field(DEFAULT_WORKERS, ge=1, le=256, description="parallel transfers")


class StageOutputs(Outputs):
    digest: str = Field(description="the dataset digest")
    corpus: CorpusUri = Field(description="the published corpus URI")


STAGE = StepSpec(
    "stage",
    "components.staging",
    StageInputs,
    StageOutputs,
    command=("stage",),
    cache=Cache("720h"),  # the same data staged the same way is the same corpus
)


class Shard(BaseModel):
    """One fan-out item of batch inference."""

    input: ShardUri
    output: ShardUri


class SplitInputs(Inputs):
    input: str = Field(
        description="JSONL file of documents, or 'demo' for the demo inputs under --demo-root"
    )
    demo_root: str | None = Field(None, description="where the demo data lives (with demo)")
    shards: int = Field(ge=1, le=10_000, description="number of shards")
    out_prefix: str = Field(description="where to write shard-NNNNN.jsonl")
    outputs_prefix: str | None = Field(
        None,
        description="pair each shard with its output URI under this prefix: the list becomes "
        "[{'input': ..., 'output': ...}] for a withParam fan-out",
    )


class SplitOutputs(Outputs):
    shards: Annotated[list[Shard] | list[ShardUri], Flag("--list")] = Field(
        description="the JSON list of shards: with --outputs-prefix, each with its output URI "
        "(objects with input and output), else the shard URIs"
    )


SPLIT = StepSpec("split", "components.inference", SplitInputs, SplitOutputs, command=("split",))


class InferInputs(Inputs):
    checkpoint: CheckpointUri = Field(description="checkpoint URI (…/step-NNNNNNNN)")
    input: ShardUri = Field(description="input shard URI (JSONL)")
    output: ShardUri = Field(description="output shard URI (JSONL), written once")
    mode: Literal["score", "generate", "both"] = Field("both", description="what to compute")
    max_new_tokens: int = Field(48, ge=1, le=4096, description="length of continuations")
    batch_size: int = Field(16, ge=1, le=4096, description="documents per forward pass")
    cache_dir: CacheDir


INFER = StepSpec(
    "infer",
    "components.inference",
    InferInputs,
    NoOutputs,
    command=("run",),
    kind="compute",
    memory_for=EVAL_MEMORY,
)


class TrainInputs(GangInputs):
    corpus: Annotated[CorpusUri, Flag("--data")] = Field(
        description="published corpus URI (from staging)"
    )
    checkpoints: CheckpointsUri = Field(
        description="checkpoint root URI, keyed by workflow and step (not by pod or attempt)"
    )
    config: str | None = Field(
        None, description="model preset (tiny, small, gpu) or a JSON/YAML config file"
    )
    steps: int | None = Field(None, ge=1, description="optimizer steps")
    checkpoint_every: int | None = Field(
        None, ge=0, description="steps between checkpoints (0 or none: the model preset's)"
    )
    log_every: int | None = Field(
        None, ge=0, description="steps between logged losses (0 or none: the model preset's)"
    )
    cache_dir: CacheDir


class TrainOutputs(Outputs):
    checkpoints: CheckpointsUri = Field(description="where the checkpoints are")


TRAIN = StepSpec(
    "train",
    "components.training",
    TrainInputs,
    TrainOutputs,
    gang=True,
    memory_for=TRAIN_MEMORY,
)


class EvaluateInputs(Inputs):
    corpus: Annotated[CorpusUri, Flag("--data")] = Field(description="published corpus URI")
    checkpoints: CheckpointsUri | None = Field(
        None, description="checkpoint root: evaluate every complete checkpoint"
    )
    max_tokens: int = Field(65_536, ge=1, description="validation tokens to score")
    batch_size: int = Field(16, ge=1, le=4096, description="validation windows per forward pass")
    metrics_out: str | None = Field(
        None, description="also write the metrics JSON here (a path or a URI)"
    )
    cache_dir: CacheDir


class EvaluateOutputs(Outputs):
    best: CheckpointUri = Field(description="the best checkpoint's URI")
    scores: str = Field(
        description="the metrics document (JSON): every checkpoint's loss and perplexity, and "
        "the best"
    )


EVALUATE = StepSpec(
    "evaluate",
    "components.evaluation",
    EvaluateInputs,
    EvaluateOutputs,
    kind="compute",
    cache=Cache("720h"),  # the same checkpoints scored on the same corpus score the same
    memory_for=EVAL_MEMORY,
)


# ---- nightly evals (components.nightly) ----------------------------------------------------


class EvalPair(BaseModel):
    """One evaluation due tonight: a model version on a suite (an item of the fan-out)."""

    candidate: str
    checkpoint: CheckpointUri
    suite: str


class NightlyInputs(Inputs):
    model: str = Field(min_length=1, description="the registered model whose versions are scored")
    suites: str = Field(description="the eval suites (JSON, compiled in from pipelines/suites)")


class DiscoverInputs(NightlyInputs):
    limit: int = Field(
        0, ge=0, description="at most this many evaluations a suite a night (0: all)"
    )


class DiscoverOutputs(Outputs):
    pending: list[EvalPair] = Field(description="what has not been scored yet")


DISCOVER = StepSpec(
    "discover", "components.nightly", DiscoverInputs, DiscoverOutputs, command=("discover",)
)


class ScoreInputs(Inputs):
    candidate: str = Field(description="the model version (NAME/VERSION)")
    checkpoint: CheckpointUri = Field(description="its checkpoint")
    suite: str = Field(description="the suite's name")
    suites: str = Field(description="the eval suites (JSON)")
    storage_root: str = Field(description="where a suite's relative dataset URI is resolved")
    cache_dir: CacheDir


class ScoreOutputs(Outputs):
    metrics: str = Field(description="the metrics (JSON)")


SCORE = StepSpec(
    "score",
    "components.nightly",
    ScoreInputs,
    ScoreOutputs,
    command=("score",),
    kind="compute",
    memory_for=EVAL_MEMORY,
)


class ReportOutputs(Outputs):
    summary: str = Field(description="the night's summary (Markdown)")
    regressions: str = Field(description="version → the suites it regressed on (JSON)")


REPORT = StepSpec("report", "components.nightly", NightlyInputs, ReportOutputs, command=("report",))


class GateInputs(Inputs):
    regressions: str = Field(description="version → the suites it regressed on (JSON)")


GATE = StepSpec("gate", "components.nightly", GateInputs, NoOutputs, command=("gate",))
