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
:func:`gangway.workflows.compiler.load_pipeline`, the pipeline file and line: an unknown input, a
missing required input, a missing output, or a value of the wrong type (a checkpoint where a
corpus is expected, text where a number is).

A gang step's outputs are the inputs it was given that it writes under (its checkpoint root):
a Volcano Job has no output files, and reading ``train.checkpoints`` both passes the root on
and waits for the training to finish.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hera.workflows import Task
from pydantic import BaseModel

from gangway.contract import OUT_DIR
from gangway.errors import PermanentError
from gangway.params import argo_text
from gangway.step.interface import GangInputs, StepSpec, flag_of, kebab
from gangway.wiring.pods import Pod, pod_requests
from gangway.wiring.refs import EACH, RUN, SCRATCH, STORAGE_ROOT, Each, Ref, hint, parameters
from gangway.wiring.types import constant_problem, element_of, fits, type_name
from gangway.workflows.memoize import (
    CHECK_MODULE,
    CHECK_OUTPUTS,
    check_args,
    check_name,
    step_arguments,
)

__all__ = [
    "EACH",
    "RUN",
    "SCRATCH",
    "STORAGE_ROOT",
    "Pod",
    "Ref",
    "TaskRef",
    "make_task",
    "parameters",
    "workflow_output",
]


@dataclass
class TaskRef:
    """A task made by calling a step: its outputs by attribute."""

    name: str
    spec: StepSpec
    task: Task
    wired: dict[str, Any] = field(default_factory=dict)
    fanned: bool = False
    """Fanned out with ``over=``: each output is the list of every item's."""

    def __getattr__(self, out: str) -> Ref:
        if out.startswith("__"):
            raise AttributeError(out)
        fields = self.spec.outputs.model_fields
        if out not in fields:
            known = ", ".join(fields) or "none"
            raise PermanentError(
                f"task {self.name!r} has no output {out!r} (its outputs: {known})"
                f"{hint(out, fields)}"
            )
        kind = fields[out].annotation
        source = f"{self.name}.{out}"
        if self.spec.gang:  # a gang's outputs are where it was told to write
            if out not in self.wired:
                raise PermanentError(
                    f"task {self.name!r}: its output {out!r} is where the gang writes; give "
                    f"{out}=… to the task"
                )
            given = self.wired[out]
            if not isinstance(given, Ref):
                return Ref(_text(given), kind, source, self.task, inline=True)
            return Ref(given.expr, kind, source, self.task, inline=given.inline)
        expr = "{{tasks." + self.name + ".outputs.parameters." + out + "}}"
        every: Any = list.__class_getitem__(kind) if self.fanned else kind
        return Ref(expr, every, source, self.task)


def workflow_output(name: str, value: Ref) -> None:
    """Make a task's output (``report.summary``) an output of the workflow itself: of the
    DAG being built, the entrypoint, so Argo shows it on the workflow's page."""
    from hera.workflows import DAG, Parameter
    from hera.workflows import models as m
    from hera.workflows._context import _context

    if not (isinstance(value, Ref) and value.producer is not None and value.item is None):
        raise PermanentError(f"workflow_output({name!r}, …): give a task's output (task.NAME)")
    dag = next((p for p in reversed(_context.pieces or []) if isinstance(p, DAG)), None)
    if dag is None:
        raise PermanentError(f'workflow_output({name!r}, …): call it inside DAG(name="main")')
    out = Parameter(name=name, value_from=m.ValueFrom(parameter=value.expr))
    have = dag.outputs if isinstance(dag.outputs, list) else [dag.outputs] if dag.outputs else []
    dag.outputs = [*have, out]


def make_task(spec: StepSpec, name: str, wiring: dict[str, Any]) -> TaskRef:
    """The template and DAG task of ``spec`` with ``wiring``, every argument checked; an
    argument of None is one not given."""
    after = wiring.pop("after", ())
    over = wiring.pop("over", None)
    pod = wiring.pop("pod", None) or Pod()
    wiring = {k: (_whole_item() if v is EACH else v) for k, v in wiring.items() if v is not None}
    where = f"task {name!r}"
    fields = spec.inputs.model_fields
    for key in wiring:
        if key not in fields:
            raise PermanentError(
                f"{where}: {spec.name} has no input {key!r} (inputs: {', '.join(fields)})"
                f"{hint(key, fields)}"
            )
    missing = [n for n, f in fields.items() if f.is_required() and n not in wiring]
    if missing:
        raise PermanentError(f"{where}: give {', '.join(missing)} (required by {spec.name})")
    if spec.cache is not None and over is not None:
        raise PermanentError(
            f"{where}: a cacheable step cannot be fanned out (over=): its cache check runs "
            "once per task; drop over= or make the step uncached"
        )
    _check_over(where, over, wiring)
    for key, value in wiring.items():
        _check(where, key, fields[key], value, over)
    _check_name(where, name)
    if spec.cache is not None:
        _check_name(where, check_name(name))
    if not isinstance(pod, Pod):
        raise PermanentError(f"{where}: pod= takes a gangway.wiring.Pod(...), not {pod!r}")
    check, task = _task(spec, name, wiring, over, pod)
    producers = [v.producer for v in wiring.values() if isinstance(v, Ref) and v.producer]
    for before in after if isinstance(after, list | tuple) else [after]:
        if not isinstance(before, TaskRef):
            raise PermanentError(f"{where}: after= takes tasks (made by calling a step)")
        producers.append(before.task)
    if isinstance(over, Ref) and over.producer is not None:
        producers.append(over.producer)
    for producer in {id(p): p for p in producers}.values():
        if check is not None:
            producer >> check
        producer >> task
    if check is not None:
        check >> task
    return TaskRef(name, spec, task, dict(wiring), fanned=over is not None)


def _whole_item() -> Ref:
    return Ref("{{item}}", Any, "EACH", item="")


def _check_over(where: str, over: Any, wiring: Mapping[str, Any]) -> None:
    items = [k for k, v in wiring.items() if isinstance(v, Ref) and v.item is not None]
    if over is None:
        if items:
            raise PermanentError(f"{where}: input {items[0]!r} reads EACH: give over=… a list")
        return
    if not isinstance(over, Ref) or not (over.type is Any or element_of(over.type)):
        what = over.source if isinstance(over, Ref) else repr(over)
        raise PermanentError(f"{where}: over= takes a list output of a task, not {what}")


def _check_name(where: str, name: str) -> None:
    """A task needs a pipeline and a DAG to go in, and a name no other task of it has."""
    from hera.workflows import DAG, WorkflowTemplate
    from hera.workflows._context import _context

    pieces = list(_context.pieces or [])
    dag = next((p for p in reversed(pieces) if isinstance(p, DAG)), None)
    if dag is None or not any(isinstance(p, WorkflowTemplate) for p in pieces):
        raise PermanentError(
            f'{where}: call steps inside `with pipeline(...) as w, DAG(name="main"):`'
        )
    if any(getattr(t, "name", None) == name for t in dag.tasks):
        raise PermanentError(f'{where}: a task of that name exists; give name="…" to this one')


def _check(where: str, key: str, info: Any, value: Any, over: Any) -> None:
    """Refuse ``value`` for input ``key`` (field ``info``), naming both."""
    want = info.annotation
    if isinstance(value, Ref):
        got = _item_type(where, key, value, over) if value.item is not None else value.type
        if not fits(want, got):
            raise PermanentError(
                f"{where}: input {key!r} takes {type_name(want)}, but {value.source} is "
                f"{type_name(got)}"
            )
        return
    if isinstance(value, Each | TaskRef):
        raise PermanentError(f"{where}: input {key!r}: give a value, an output or EACH.field")
    problem = constant_problem(info, value)
    if problem is not None:
        raise PermanentError(f"{where}: input {key!r}: {problem} (got {value!r})")
    if isinstance(value, str) and "{{" in value:
        raise PermanentError(
            f"{where}: input {key!r}: write no '{{{{…}}}}' by hand; use a parameter or an "
            "output (p.NAME, task.OUTPUT, RUN / …)"
        )


def _item_type(where: str, key: str, ref: Ref, over: Ref) -> Any:
    """The type of ``EACH`` or ``EACH.field`` over the list ``over``."""
    elements = element_of(over.type)
    if not elements:
        return Any
    if not ref.item:
        return elements[0] if len(elements) == 1 else Any
    for element in elements:
        if _is_model(element) and ref.item in element.model_fields:
            return element.model_fields[ref.item].annotation
    known = {n: None for e in elements if _is_model(e) for n in e.model_fields}
    what = (
        f"have no field {ref.item!r} (they have {', '.join(known)})"
        if known
        else (f"are {type_name(elements[0])}, not objects with fields: use EACH")
    )
    raise PermanentError(
        f"{where}: input {key!r}: the items of {over.source} {what}{hint(ref.item, known)}"
    )


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _text(value: Any) -> str:
    return value.expr if isinstance(value, Ref) else argo_text(value)


def _task(
    spec: StepSpec, name: str, wiring: Mapping[str, Any], over: Any, pod: Pod
) -> tuple[Task | None, Task]:
    """The template (its inputs: what varies by run or by task; the rest written in) and the
    DAG task passing them; before it, for a cacheable step, its cache check's task
    (:mod:`gangway.workflows.memoize`)."""
    from gangway.workflows.templates import gang_step, step

    passed = {k: v for k, v in wiring.items() if isinstance(v, Ref) and not v.inline}
    names = {k: kebab(k) for k in passed}

    def value(key: str) -> str:
        return "{{inputs.parameters." + names[key] + "}}" if key in passed else _text(wiring[key])

    flags = spec.flags()
    args = [*spec.command, *(a for k in wiring if k in flags for a in (flags[k], value(k)))]
    where = f"task {name!r}"
    if spec.gang:
        if pod.gpus or pod.gpu_product is not None:
            raise PermanentError(
                f"{where}: a gang's GPUs are gpus_per_node= and gpu_product=, not pod=Pod(gpus=…)"
            )
        shape: dict[str, Any] = {
            k: value(k) if k in wiring else GangInputs.model_fields[k].default
            for k in GangInputs.PLACEMENT
        }
        shape["procs_per_node"] = str(shape["procs_per_node"])
        shape["gpus_per_node"] = str(shape["gpus_per_node"])
        if "nodes" not in passed:  # a fixed gang size is a number in the Job
            shape["nodes"] = int(shape["nodes"])
        requests = pod_requests(
            spec, pod.size_for, procs=wiring.get("procs_per_node", 1), where=where
        )
        template: Any = gang_step(
            name,
            module=spec.module,
            args=args,
            inputs=list(names.values()),
            requests=requests,
            **shape,
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
            requests=pod_requests(spec, pod.size_for, where=where),
            cache=spec.cache,
            gpus=pod.gpus,
            gpu_product=None if pod.gpu_product is None else _text(pod.gpu_product),
        )
    arguments = {names[k]: _text(v) for k, v in passed.items()}
    with_param = over.expr if isinstance(over, Ref) else None
    check = None
    if spec.cache is not None:
        roles = spec.cache_roles()
        spec_args = check_args(
            name, spec.module, args, spec.cache, {flags[k]: roles[k] for k in wiring if k in flags}
        )
        checker = step(
            check_name(name),
            module=CHECK_MODULE,
            args=spec_args,
            inputs=list(names.values()),
            outputs=list(CHECK_OUTPUTS),
        )
        check = Task(name=check_name(name), template=checker, arguments=dict(arguments))
        arguments.update(step_arguments(name))
    task = Task(name=name, template=template, arguments=arguments, with_param=with_param)
    return check, task
