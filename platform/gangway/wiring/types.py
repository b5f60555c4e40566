"""Which values may go where: the type rules of typed wiring, as pure functions.

A value wired to an input is either known now (a constant: validated strictly against the
field, bounds included) or a reference whose type is known (a parameter's, another task's
output's). The rules for references:

* the same type fits; ``X | None`` takes what ``X`` takes (``None`` means "not given");
* a typed URI takes the same kind (or a narrower one) or plain text — a URI typed by hand —
  but never another kind: a checkpoint is not a corpus;
* ``str`` takes any text (URIs, text ``Literal``/``Enum`` values); ``Path`` takes text;
* ``float`` takes whole numbers; a ``Literal`` or ``Enum`` fits a type when all its values do,
  and a ``Literal`` input when its values are among the allowed ones.
"""

from __future__ import annotations

import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from gangway.step.interface import TypedUri, unwrap_optional

__all__ = ["constant_problem", "element_of", "fits", "type_name", "unwrap_optional"]


def _choices(t: Any) -> tuple[Any, ...] | None:
    """The values of a ``Literal`` or an ``Enum``; None for other types."""
    if typing.get_origin(t) is Literal:
        return typing.get_args(t)
    if isinstance(t, type) and issubclass(t, Enum):
        return tuple(m.value for m in t)
    return None


def _value_fits(want: Any, value: Any) -> bool:
    if want is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if want is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if want in (str, Path) or (isinstance(want, type) and issubclass(want, TypedUri)):
        return isinstance(value, str)
    return isinstance(want, type) and isinstance(value, want)


def fits(want: Any, got: Any) -> bool:
    """May a value of type ``got`` go where ``want`` is expected?"""
    if want is Any or got is Any or want == got:
        return True
    if isinstance(want, types.UnionType) or typing.get_origin(want) is typing.Union:
        return any(fits(w, got) for w in typing.get_args(want) if w is not type(None))
    got = unwrap_optional(got)
    allowed, given = _choices(want), _choices(got)
    if given is not None:  # a Literal/Enum value: each of its values must fit
        if allowed is not None:
            return set(given) <= set(allowed)
        return all(_value_fits(want, v) for v in given)
    if allowed is not None:
        return False  # an open type cannot promise one of a few values
    if isinstance(want, type) and issubclass(want, TypedUri):
        return got is str or (isinstance(got, type) and issubclass(got, want))
    if want is str:
        return isinstance(got, type) and issubclass(got, str)
    if want is float:
        return got in (int, float)
    if want is Path:
        return got in (str, Path)
    return False


def constant_problem(info: FieldInfo, value: Any) -> str | None:
    """What is wrong with the constant ``value`` for a field (type and bounds, strictly: the
    step will parse its text back); None when it fits."""
    want = info.annotation
    if isinstance(value, Path):
        value = str(value)
    inner = unwrap_optional(want)
    if inner is Path or (isinstance(inner, type) and issubclass(inner, TypedUri)):
        want = str | None if inner is not want else str
    try:
        typed = typing.Annotated[want, *info.metadata] if info.metadata else want
        adapter: TypeAdapter[Any] = TypeAdapter(typed)  # type: ignore[arg-type]
        adapter.validate_python(value, strict=True)
    except ValidationError as e:
        return str(e.errors()[0]["msg"])
    return None


def element_of(t: Any) -> list[Any]:
    """The element types of a list type (one per list in a union of lists); [] if none."""
    union = isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union
    options = typing.get_args(t) if union else (t,)
    out = []
    for o in options:
        if typing.get_origin(o) is list and typing.get_args(o):
            out.append(typing.get_args(o)[0])
    return out


def type_name(t: Any) -> str:
    """A type as a message says it."""
    t = unwrap_optional(t)
    if isinstance(t, type) and issubclass(t, TypedUri):
        return f"a {t.kind} ({t.__name__})"
    choices = _choices(t)
    if choices is not None:
        return "one of " + ", ".join(map(str, choices))
    if typing.get_origin(t) is list:
        inner = typing.get_args(t)
        return "a list" + (f" of {type_name(inner[0])}" if inner else "")
    names = {
        int: "a whole number",
        float: "a number",
        str: "text",
        bool: "true/false",
        Path: "a path",
    }
    return names.get(t, str(getattr(t, "__name__", t)))
