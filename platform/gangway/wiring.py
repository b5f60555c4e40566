"""Typed wiring: calling a step in a pipeline makes a task, checked when the pipeline compiles.

Inside ``with pipeline(...) as w, DAG(name="main"):``, a :class:`~gangway.step.interface.StepSpec`
called with keyword arguments becomes a Hera template and a DAG task::

    p = parameters(Params)
    stage = STAGE(source=p.source)
    train = TRAIN(corpus=stage.corpus, steps=p.train_steps, checkpoints=RUN / "checkpoints")
    evaluate = EVALUATE(corpus=stage.corpus, checkpoints=train.checkpoints)

Each argument is a value (validated against the field's type now) or a :class:`Ref` — a
pipeline parameter (``p.train_steps``), another task's output (``stage.corpus``), a path
under the run (``RUN / "x"``) or a fan-out item (``EACH.input`` with ``over=split.shards``).
A task depends on every task whose output it reads, and on those in ``after=``. Every
mistake is a compile-time error naming the task and the field — and, through
:func:`gangway.compiler.load_pipeline`, the pipeline file and line: an unknown input, a
missing required input, a missing output, or a value of the wrong type (a checkpoint where a
corpus is expected, text where a number is).

A gang step's outputs are the inputs it was given that it writes under (its checkpoint root):
a Volcano Job has no output files, and reading ``train.checkpoints`` both passes the root on
and waits for the training to finish.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hera.workflows import Task
from pydantic import BaseModel, TypeAdapter, ValidationError

from gangway.contract import OUT_DIR
from gangway.contract import SCRATCH as SCRATCH_DIR
from gangway.errors import PermanentError, closest
from gangway.step.interface import GangInputs, StepSpec, TypedUri, flag_of

__all__ = ["EACH", "RUN", "SCRATCH", "STORAGE_ROOT", "Ref", "TaskRef", "make_task", "parameters"]

RESERVED = ("name", "after", "over")
"""Keywords of a step call that are not inputs."""


@dataclass(frozen=True)
class Ref:
    """A value known when the workflow runs: its Argo expression, its type, where it is from."""

    expr: str
    type: Any
    source: str
    producer: Any = None
    """The Hera task whose output this is (a task reading it waits for it)."""
    item: str | None = None
    """For a fan-out item: the field of the element it reads."""
    inline: bool = False
    """The same for every task of a run (the storage root, the run's place, the scratch
    directory): written into the step's command line, not passed as a template input."""

    def __truediv__(self, part: str) -> Ref:
        """A path below this one (the type becomes plain text: it names something else)."""
        source = f"{self.source}/{part}"
        return Ref(f"{self.expr}/{part}", str, source, self.producer, inline=self.inline)


STORAGE_ROOT = Ref("{{workflow.parameters.storage-root}}", str, "storage-root", inline=True)
"""The platform's storage root (``-p storage-root``); the corpora and every run are below it."""
SCRATCH = Ref(SCRATCH_DIR, str, "scratch", inline=True)
"""The step's own scratch directory (an emptyDir; ``/gangway`` in every step's container)."""
RUN = STORAGE_ROOT / "runs" / "{{workflow.uid}}"
"""This run's own place: retried steps find their earlier work here."""


class _Each:
    """The element a fanned-out task gets (``over=`` a list output): ``EACH.field``."""

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("__"):
            raise AttributeError(name)
        return Ref("{{item." + name + "}}", Any, f"EACH.{name}", item=name)


EACH = _Each()


class _Parameters:
    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Ref:
        fields = self._model.model_fields
        if name not in fields:
            raise PermanentError(f"parameters: no field {name!r}{_hint(name, fields)}")
        expr = "{{workflow.parameters." + name.replace("_", "-") + "}}"
        return Ref(expr, fields[name].annotation, f"parameter {name}")


def parameters(model: type[BaseModel]) -> Any:
    """The pipeline's parameters as references: ``parameters(Params).train_steps``."""
    return _Parameters(model)


@dataclass
class TaskRef:
    """A task made by calling a step: its outputs by attribute."""

    name: str
    spec: StepSpec
    task: Task
    wired: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, out: str) -> Ref:
        if out.startswith("__"):
            raise AttributeError(out)
        fields = self.spec.outputs.model_fields
        if out not in fields:
            known = ", ".join(fields) or "none"
            raise PermanentError(
                f"task {self.name!r} has no output {out!r} (its outputs: {known})"
                f"{_hint(out, fields)}"
            )
        kind = fields[out].annotation
        if self.spec.gang:  # a gang's outputs are where it was told to write
            given = self.wired[out]
            if not isinstance(given, Ref):
                return Ref(_text(given), kind, f"{self.name}.{out}", self.task, inline=True)
            return Ref(given.expr, kind, f"{self.name}.{out}", self.task, inline=given.inline)
        expr = "{{tasks." + self.name + ".outputs.parameters." + out + "}}"
        return Ref(expr, kind, f"{self.name}.{out}", self.task)


def _hint(name: str, known: Mapping[str, Any]) -> str:
    near = closest(name, list(known))
    return f"; did you mean {near!r}?" if near else ""


def make_task(spec: StepSpec, name: str, wiring: dict[str, Any]) -> TaskRef:
    """The template and DAG task of ``spec`` with ``wiring``, every argument checked."""
    after = wiring.pop("after", ())
    over = wiring.pop("over", None)
    where = f"task {name!r}"
    fields = spec.inputs.model_fields
    for key in wiring:
        if key not in fields:
            raise PermanentError(
                f"{where}: {spec.name} has no input {key!r} (inputs: {', '.join(fields)})"
                f"{_hint(key, fields)}"
            )
    missing = [n for n, f in fields.items() if f.is_required() and n not in wiring]
    if missing:
        raise PermanentError(f"{where}: give {', '.join(missing)} (required by {spec.name})")
    for key, value in wiring.items():
        _check(where, key, fields[key].annotation, value, over)
    _check_name(where, name)
    task = _task(spec, name, wiring, over)
    producers = [v.producer for v in wiring.values() if isinstance(v, Ref) and v.producer]
    for before in after if isinstance(after, list | tuple) else [after]:
        if not isinstance(before, TaskRef):
            raise PermanentError(f"{where}: after= takes tasks (made by calling a step)")
        producers.append(before.task)
    if isinstance(over, Ref) and over.producer is not None:
        producers.append(over.producer)
    for producer in {id(p): p for p in producers}.values():
        producer >> task
    return TaskRef(name, spec, task, dict(wiring))


def _check_name(where: str, name: str) -> None:
    """A task needs a DAG to go in, and a name no other task of it has."""
    from hera.workflows import DAG
    from hera.workflows._context import _context

    dag = next((p for p in reversed(_context.pieces) if isinstance(p, DAG)), None)
    if dag is None:
        raise PermanentError(
            f"{where}: call steps inside `with pipeline(...) as w, DAG(name=\"main\"):`"
        )
    if any(getattr(t, "name", None) == name for t in dag.tasks):
        raise PermanentError(f"{where}: a task of that name exists; give name=\"…\" to this one")


def _check(where: str, key: str, want: Any, value: Any, over: Any) -> None:
    """Refuse ``value`` for input ``key`` of type ``want``, naming both."""
    if isinstance(value, Ref):
        got = value.type
        if value.item is not None:
            got = _item_type(where, key, value, over)
        if not _fits(want, got):
            raise PermanentError(
                f"{where}: input {key!r} takes {_name(want)}, but {value.source} is {_name(got)}"
            )
        return
    try:
        TypeAdapter(want).validate_python(value)
    except ValidationError as e:
        msg = e.errors()[0]["msg"]
        raise PermanentError(f"{where}: input {key!r}: {msg} (got {value!r})") from None


def _item_type(where: str, key: str, ref: Ref, over: Any) -> Any:
    if not isinstance(over, Ref):
        raise PermanentError(f"{where}: input {key!r} reads {ref.source}: give over=… a list")
    args = typing.get_args(over.type)
    element = args[0] if typing.get_origin(over.type) is list and args else None
    if not (isinstance(element, type) and issubclass(element, BaseModel)):
        return Any
    fields = element.model_fields
    if ref.item not in fields:
        raise PermanentError(
            f"{where}: input {key!r}: the items of {over.source} have no field {ref.item!r} "
            f"(they have {', '.join(fields)}){_hint(ref.item or '', fields)}"
        )
    return fields[ref.item].annotation


def _fits(want: Any, got: Any) -> bool:
    """May a value of type ``got`` go where ``want`` is expected?"""
    if want is Any or got is Any or want == got:
        return True
    if isinstance(want, types.UnionType) or typing.get_origin(want) is typing.Union:
        return any(_fits(w, got) for w in typing.get_args(want) if w is not type(None))
    if typing.get_origin(want) is Literal:
        allowed = set(typing.get_args(want))
        return typing.get_origin(got) is Literal and set(typing.get_args(got)) <= allowed
    if isinstance(want, type) and issubclass(want, TypedUri):  # plain text may name one
        return got is str or (isinstance(got, type) and issubclass(got, want))
    if want is str:
        return (isinstance(got, type) and issubclass(got, str)) or _is_text_literal(got)
    if want is float:
        return got in (int, float)
    if want is Path:  # a path is written as text
        return got in (str, Path)
    return False


def _is_text_literal(t: Any) -> bool:
    return typing.get_origin(t) is Literal and all(isinstance(a, str) for a in typing.get_args(t))


def _name(t: Any) -> str:
    options = [a for a in typing.get_args(t) if a is not type(None)]
    if isinstance(t, types.UnionType) and len(options) == 1:
        t = options[0]  # X | None: the None is "not given"
    if isinstance(t, type) and issubclass(t, TypedUri):
        return f"a {t.kind} ({t.__name__})"
    if typing.get_origin(t) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(t)))
    return {int: "a whole number", float: "a number", str: "text", bool: "true/false"}.get(
        t, str(getattr(t, "__name__", t))
    )


def _text(value: Any) -> str:
    if isinstance(value, Ref):
        return value.expr
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _task(spec: StepSpec, name: str, wiring: Mapping[str, Any], over: Any) -> Task:
    """The template (its inputs: what varies by run or by task; the rest written in) and the
    DAG task passing them."""
    from gangway.pipeline import gang_step, step

    passed = {k: v for k, v in wiring.items() if isinstance(v, Ref) and not v.inline}
    names = {k: k.replace("_", "-") for k in passed}

    def value(key: str) -> str:
        return "{{inputs.parameters." + names[key] + "}}" if key in passed else _text(wiring[key])

    flags = spec.flags()
    args = [*spec.command, *(a for k in wiring if k in flags for a in (flags[k], value(k)))]
    if spec.gang:
        shape = {
            k: value(k) if k in wiring else str(GangInputs.model_fields[k].default)
            for k in GangInputs.PLACEMENT
        }
        template: Any = gang_step(
            name, module=spec.module, args=args, inputs=list(names.values()), **shape
        )
    else:
        outs = list(spec.outputs.model_fields)
        args += [a for o in outs for a in (f"{flag_of(o)}-out", f"{OUT_DIR}/{o}")]
        template = step(
            name,
            module=spec.module,
            args=args,
            inputs=list(names.values()),
            outputs=outs,
            kind=spec.kind,
            requests=spec.requests,
        )
    arguments = {names[k]: _text(v) for k, v in passed.items()}
    with_param = over.expr if isinstance(over, Ref) else None
    return Task(name=name, template=template, arguments=arguments, with_param=with_param)
