"""What a step call is given besides plain values: a :class:`Ref` to something known only when
the workflow runs — a pipeline parameter (``parameters(Params).NAME``), a task's output, the
run's place (``RUN``), the storage root, the step's scratch directory, or the element of a
fan-out (``EACH``) — with its type, so a wiring mistake is a compile-time error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gangway.contract import SCRATCH as SCRATCH_DIR
from gangway.errors import PermanentError, closest
from gangway.step.interface import kebab

__all__ = ["EACH", "RUN", "SCRATCH", "STORAGE_ROOT", "Each", "Ref", "hint", "parameters"]


@dataclass(frozen=True)
class Ref:
    """A value known when the workflow runs: its Argo expression, its type, where it is from."""

    expr: str
    type: Any
    source: str
    producer: Any = None
    """The Hera task whose output this is (a task reading it waits for it)."""
    item: str | None = None
    """For a fan-out item: the field of the element it reads ("" for the element itself)."""
    inline: bool = False
    """The same for every task of a run (the storage root, the run's place, the scratch
    directory): written into the step's command line, not passed as a template input."""

    def __truediv__(self, part: str | Ref) -> Ref:
        """A path below this one (plain text: it names something else)."""
        if isinstance(part, Ref):
            return Ref(
                f"{self.expr}/{part.expr}",
                str,
                f"{self.source}/{part.source}",
                self.producer or part.producer,
                inline=self.inline and part.inline,
            )
        if not isinstance(part, str):
            raise PermanentError(f"{self.source} / {part!r}: a path part is text")
        source = f"{self.source}/{part}"
        return Ref(f"{self.expr}/{part}", str, source, self.producer, inline=self.inline)


STORAGE_ROOT = Ref("{{workflow.parameters.storage-root}}", str, "storage-root", inline=True)
"""The platform's storage root (``-p storage-root``); the corpora and every run are below it."""
SCRATCH = Ref(SCRATCH_DIR, str, "scratch", inline=True)
"""The step's own scratch directory (an emptyDir; ``/gangway`` in every step's container)."""
RUN = STORAGE_ROOT / "runs" / "{{workflow.uid}}"
"""This run's own place: retried steps find their earlier work here."""


class Each:
    """The element a fanned-out task gets (``over=`` a list output): ``EACH`` itself, or
    ``EACH.field`` of an element that is an object."""

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("__"):
            raise AttributeError(name)
        return Ref("{{item." + name + "}}", Any, f"EACH.{name}", item=name)


EACH: Any = Each()


class _Parameters:
    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Ref:
        fields = self._model.model_fields
        if name not in fields:
            raise PermanentError(f"parameters: no field {name!r}{hint(name, fields)}")
        expr = "{{workflow.parameters." + kebab(name) + "}}"
        return Ref(expr, fields[name].annotation, f"parameter {name}")


def parameters(model: type[BaseModel]) -> Any:
    """The pipeline's parameters as references: ``parameters(Params).train_steps``."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise PermanentError(
            f"parameters({model!r}): give the pipeline's parameter model "
            "(a gangway.params.PipelineParams subclass)"
        )
    return _Parameters(model)


def hint(name: str, known: Mapping[str, Any]) -> str:
    """ "; did you mean X?" for the known name ``name`` most likely meant ("" if none)."""
    near = closest(name, list(known))
    return f"; did you mean {near!r}?" if near else ""
