"""A step's interface, declared once: Pydantic models of what it takes and what it gives back.

A component declares its inputs and outputs as models, and a :class:`StepSpec` naming its
module::

    class TrainInputs(GangInputs):
        corpus: CorpusUri = Field(description="the corpus to train on")
        steps: int = Field(300, ge=1, description="optimizer steps")

    TRAIN = StepSpec("train", "components.training", TrainInputs, TrainOutputs, gang=True)

The same declaration drives three things:

* the component's command line — :meth:`StepSpec.add_arguments` adds ``--FIELD`` for every
  input (``--checkpoint-every``; type and help from the field) and ``--FIELD-out PATH`` for
  every output, and :meth:`StepSpec.write_outputs` writes the outputs there;
* the Argo template — one input parameter per wired input, one output parameter per output,
  read from ``/gangway/out/FIELD``;
* what a pipeline may wire to it — calling the spec in a pipeline makes a task, and
  :mod:`gangway.wiring` checks every argument at compile time (unknown input, missing required
  one, missing output, wrong type).

Artifact-like values are typed URIs (:class:`TypedUri` subclasses: a corpus, a checkpoint
root, one checkpoint, a shard), not bare strings, so a checkpoint cannot be wired where a
corpus is expected. This module is light (Pydantic only): components import it at run time.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import core_schema

from gangway.errors import PermanentError, field_errors
from gangway.step.caching import Cache, Place, Reads, record_outputs

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler

    from gangway.argo.retries import StepKind

__all__ = [
    "CheckpointUri",
    "CheckpointsUri",
    "CorpusUri",
    "DatasetUri",
    "Flag",
    "GangInputs",
    "Inputs",
    "NoOutputs",
    "Outputs",
    "ShardUri",
    "StepSpec",
    "TypedUri",
    "flag_of",
    "kebab",
    "unwrap_optional",
]


class TypedUri(str):
    """A URI of one kind of data; subclasses are the kinds. Validates as a string."""

    kind: ClassVar[str] = "URI"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class DatasetUri(TypedUri):
    kind = "dataset"


class CorpusUri(TypedUri):
    kind = "corpus"


class CheckpointsUri(TypedUri):
    kind = "checkpoint root"


class CheckpointUri(TypedUri):
    kind = "checkpoint"


class ShardUri(TypedUri):
    kind = "shard"


@dataclass(frozen=True)
class Flag:
    """Field metadata: more command-line spellings of it (``Annotated[str, Flag("--data")]``)."""

    aliases: tuple[str, ...]

    def __init__(self, *aliases: str) -> None:
        object.__setattr__(self, "aliases", aliases)


class Inputs(BaseModel):
    """Base of a step's inputs."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)


class GangInputs(Inputs):
    """Inputs of a gang step: the gang's shape, which places its pods (not command-line
    flags of the module)."""

    nodes: int = Field(2, ge=1, description="pods in the gang")
    procs_per_node: int = Field(1, ge=1, description="torchrun processes per pod")
    gpus_per_node: int = Field(0, ge=0, description="GPUs per pod (needs gpu_product)")
    gpu_product: str | None = Field(
        None,
        description="the GPU model of the pods: the nvidia.com/gpu.product node label, e.g. "
        "NVIDIA-H200 (None: a CPU gang)",
    )

    PLACEMENT: ClassVar[tuple[str, ...]] = (
        "nodes",
        "procs_per_node",
        "gpus_per_node",
        "gpu_product",
    )


class Outputs(BaseModel):
    """Base of a step's outputs."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)


class NoOutputs(Outputs):
    pass


def kebab(name: str) -> str:
    """A field's name as Argo parameters and command-line flags spell it."""
    return name.replace("_", "-")


def flag_of(name: str) -> str:
    return "--" + kebab(name)


def unwrap_optional(t: Any) -> Any:
    """``X`` for ``X | None``; ``t`` otherwise."""
    options = [a for a in typing.get_args(t) if a is not type(None)]
    is_union = isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union
    return options[0] if is_union and len(options) == 1 else t


def _converter(annotation: Any) -> Callable[[str], Any]:
    """How argparse turns a flag's text into the field's type (the model validates after)."""
    annotation = unwrap_optional(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        kinds = {type(v) for v in typing.get_args(annotation)}
        annotation = kinds.pop() if len(kinds) == 1 else str
    if annotation is bool:
        return _boolean
    if annotation in (int, float, Path):
        return typing.cast(Callable[[str], Any], annotation)
    return str


def _boolean(text: str) -> bool:
    value = {"true": True, "false": False}.get(text.strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give true or false")
    return value


def _help(info: Any) -> str:
    text = info.description or ""
    if not info.is_required() and info.default is not None:
        text += f" (default: {info.default})"
    return text


TaskMaker = Callable[["StepSpec", str, dict[str, Any]], Any]
"""What calling a step does: make the task (:func:`gangway.wiring.make_task`)."""
TASK_MAKER: ContextVar[TaskMaker | None] = ContextVar("gangway_task_maker", default=None)
"""Set for the ``with`` block of a pipeline (:class:`gangway.pipeline.PipelineTemplate`): the
step SDK, which ships in the image, does not import the pipeline-building code it serves."""


@dataclass(frozen=True)
class StepSpec:
    """A step: its default task name, the module it runs (``python -m MODULE COMMAND…``), its
    interface, the retry rules of its kind, and whether it is a gang (a Volcano Job)."""

    name: str
    module: str
    inputs: type[Inputs]
    outputs: type[Outputs] = NoOutputs
    command: tuple[str, ...] = ()
    kind: StepKind = "io"
    gang: bool = False
    requests: dict[str, str] | None = field(default=None, compare=False)
    memory_for: dict[str, str] | None = field(default=None, compare=False)
    """Model preset → the memory of one process holding it (``pod=Pod(size_for=...)``)."""
    cache: Cache | None = None
    """Cacheable (:mod:`gangway.step.caching`): a run on the same inputs and data reuses outputs."""

    def __post_init__(self) -> None:
        taken = [n for n in ("name", "after", "over", "pod") if n in self.inputs.model_fields]
        if taken:
            raise PermanentError(
                f"step {self.name!r}: an input may not be called {taken[0]!r} (a keyword of a "
                "step call: name=, after=, over=, pod=); rename it"
            )
        clash = sorted(
            {flag_of(n) for n in self.inputs.model_fields}
            & {f"{flag_of(o)}-out" for o in self.outputs.model_fields}
        )
        if clash:
            raise PermanentError(
                f"step {self.name!r}: input and output flags clash on {clash[0]} (an output "
                f"NAME is written with --NAME-out); rename the output or the input"
            )
        if self.cache is not None and self.gang:
            raise PermanentError(
                f"step {self.name!r}: a gang step cannot be cached (Argo memoizes container "
                "templates, and a gang is a Volcano Job); drop cache="
            )

    def cache_roles(self) -> dict[str, str]:
        """Input field → ``read`` (keyed by the content at its URI), ``place`` (not keyed) or
        ``value`` (keyed by value)."""
        roles = {}
        for name, info in self.inputs.model_fields.items():
            inner = unwrap_optional(info.annotation)
            typed = isinstance(inner, type) and issubclass(inner, TypedUri)
            if any(isinstance(m, Place) for m in info.metadata):
                roles[name] = "place"
            elif typed or any(isinstance(m, Reads) for m in info.metadata):
                roles[name] = "read"
            else:
                roles[name] = "value"
        return roles

    def flags(self) -> dict[str, str]:
        """Input field → its command-line flag (placement fields of a gang have none)."""
        placement = GangInputs.PLACEMENT if self.gang else ()
        return {n: flag_of(n) for n in self.inputs.model_fields if n not in placement}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--FIELD`` per input and ``--FIELD-out PATH`` per output, on ``parser``."""
        for name, flag in self.flags().items():
            info = self.inputs.model_fields[name]
            aliases = [a for m in info.metadata if isinstance(m, Flag) for a in m.aliases]
            inner = unwrap_optional(info.annotation)
            literal = typing.get_origin(inner) is typing.Literal
            parser.add_argument(
                flag,
                *aliases,
                dest=name,
                type=_converter(info.annotation),
                choices=typing.get_args(inner) if literal else None,
                required=info.is_required(),
                default=None if info.is_required() else info.get_default(call_default_factory=True),
                help=_help(info),
            )
        for name, info in self.outputs.model_fields.items():
            if self.gang:  # a gang's outputs are where it was told to write, not files
                break
            parser.add_argument(
                f"{flag_of(name)}-out",
                *[f"{a}-out" for m in info.metadata if isinstance(m, Flag) for a in m.aliases],
                dest=f"{name}_out",
                type=Path,
                help=f"write {info.description or name} to this file",
            )

    def read_inputs(self, args: argparse.Namespace) -> Inputs:
        """The inputs given on the command line, validated (an error names the flag)."""
        given = {n: getattr(args, n) for n in self.flags() if getattr(args, n, None) is not None}
        try:
            return self.inputs.model_validate(given)
        except ValidationError as e:
            every = field_errors(e, root="flags", path=lambda loc: flag_of(str(loc[0])))
            raise PermanentError(every) from None

    def write_outputs(self, args: argparse.Namespace, outputs: Outputs) -> None:
        """Each output to its ``--FIELD-out`` file, when one was given; and, for a cacheable
        step given a record to write by its cache check, the record
        (:mod:`gangway.step.caching`)."""
        texts = {
            name: value if isinstance(value, str) else _json(value)
            for name, value in outputs.model_dump().items()
        }
        for name, text in texts.items():
            path = getattr(args, f"{name}_out", None)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        if self.cache is not None:
            record_outputs(texts)

    def __call__(self, *, name: str | None = None, **wiring: Any) -> Any:
        """In a pipeline's ``with`` block: a task running this step with ``wiring``
        (:mod:`gangway.wiring`)."""
        make = TASK_MAKER.get()
        if make is None:
            raise PermanentError(
                f"step {self.name!r} called outside a pipeline: calling a step makes a task of "
                "the pipeline being built; call it inside `with pipeline(...)` "
                "(gangway.pipeline)"
            )
        return make(self, name or self.name, wiring)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))
