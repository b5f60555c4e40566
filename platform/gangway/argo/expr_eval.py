"""The evaluation of an expr tree (:mod:`gangway.argo.expr_syntax`) with expr's runtime rules
(expr-lang/expr v1.17 vm/runtime, builtin): ints stay ints (``/`` and ``**`` give floats,
``%`` truncates as Go does), ``==`` compares numbers across int and float, a missing map key is
nil and fetching from nil is an error unless ``?.`` ends the chain, ``&&`` ``||`` ``?:``
short-circuit and want booleans, closures bind ``#`` (``.field`` is ``#.field``) and
``#index``. Argo's helpers: ``asInt`` ``asFloat`` (expr's ``int``/``float``), ``string``
(``%v``), ``toJson`` (``json.Marshal``), ``jsonpath`` (:mod:`gangway.argo.jsonpath`).
Nothing here reaches Python objects beyond lists, maps, strings, numbers, booleans, nil.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from gangway.argo.expr_syntax import Node
from gangway.argo.gofmt import go_json, go_text
from gangway.argo.jsonpath import jsonpath
from gangway.errors import UnsupportedConstruct

__all__ = ["Evaluator", "ExprError"]

_INT64 = (-(2**63), 2**63 - 1)


class ExprError(UnsupportedConstruct):
    """The expression fails as expr (so Argo) fails it: a type mismatch, a fetch from nil..."""


class _NilChain(Exception):
    """A ``?.`` met nil: the chain it belongs to is nil."""


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _type(v: Any) -> str:
    if v is None:
        return "nil"
    names = {bool: "bool", int: "int", float: "float64", str: "string", list: "array"}
    return names.get(type(v), "map")


def equal(a: Any, b: Any) -> bool:
    """expr's ``==``: numbers by value (``1 == 1.0``), other values as ``reflect.DeepEqual``."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return _deep_equal(a, b)


def _deep_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _as_int(v: Any) -> int:
    """expr's ``int()`` (Argo's ``asInt``): numbers truncated, strings as ``strconv.Atoi``."""
    if _is_number(v):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"int({go_text(v)}): not a finite number")
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"[-+]?[0-9]+", v):
        n = int(v)
        if _INT64[0] <= n <= _INT64[1]:
            return n
    raise ValueError(f"asInt({v!r}): not an integer (invalid operation: int({go_text(v)}))")


def _as_float(v: Any) -> float:
    """expr's ``float()`` (Argo's ``asFloat``): strings as ``strconv.ParseFloat``."""
    if _is_number(v):
        return float(v)
    if isinstance(v, str):
        if re.match(r"[-+]?0[xX]", v):
            raise UnsupportedConstruct(f"asFloat({v!r}): hex floats are not read locally")
        number = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
        if re.fullmatch(number, v) or re.fullmatch(r"[-+]?(?:inf|infinity|nan)", v, re.I):
            return float(v)
    raise ValueError(f"asFloat({v!r}): not a number (invalid operation: float({go_text(v)}))")


def _length(v: Any) -> int:
    if isinstance(v, list | dict):
        return len(v)
    if isinstance(v, str):
        if not v.isascii():
            raise UnsupportedConstruct("len() of a non-ASCII string is not evaluated locally")
        return len(v)
    raise ValueError(f"invalid argument for len (type {_type(v)})")


def _json_path(doc: Any, path: Any) -> Any:
    if not (isinstance(doc, str) and isinstance(path, str)):
        raise ValueError(f"jsonpath(string, string), not ({_type(doc)}, {_type(path)})")
    return jsonpath(doc, path)


_FUNCS: dict[str, Callable[..., Any]] = {
    "asInt": _as_int,
    "asFloat": _as_float,
    "string": go_text,
    "toJson": go_json,
    "jsonpath": _json_path,
    "len": _length,
}


def _checked(n: int) -> int:
    if not _INT64[0] <= n <= _INT64[1]:
        raise UnsupportedConstruct(f"{n} overflows Go's int64, which is not emulated locally")
    return n


def _arithmetic(op: str, a: Any, b: Any) -> Any:
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        return a + b
    if not (_is_number(a) and _is_number(b)):
        raise ValueError(f"invalid operation: {op} (mismatched types {_type(a)} and {_type(b)})")
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "/":
        if b == 0:
            return math.copysign(math.inf, a) if a else math.nan
        return float(a) / float(b)
    if op in ("**", "^"):
        try:
            return math.pow(a, b)
        except (ValueError, OverflowError):
            return math.nan if a < 0 else math.inf
    if op == "%":
        if not both_int:
            raise ValueError(f"invalid operation: % (mismatched types {_type(a)} and {_type(b)})")
        if b == 0:
            raise ValueError("integer divide by zero")
        return _checked(int(math.fmod(a, b)) if abs(a) < 2**53 else a - b * int(a / b))
    result = {"+": a + b, "-": a - b, "*": a * b}[op]
    return _checked(result) if both_int else float(result)


def _compare(op: str, a: Any, b: Any) -> bool:
    if not ((_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))):
        raise ValueError(f"invalid operation: {op} (mismatched types {_type(a)} and {_type(b)})")
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _contains(container: Any, item: Any) -> bool:
    """expr's ``in``: an element of an array, a key of a map."""
    if container is None:
        return False
    if isinstance(container, list):
        return any(equal(item, v) for v in container)
    if isinstance(container, dict):
        if not isinstance(item, str):
            raise ValueError(f"cannot use {_type(item)} as a map key")
        return item in container
    raise ValueError(f"operator in not defined on {_type(container)}")


def _strings(op: str, a: Any, b: Any) -> bool:
    if not (isinstance(a, str) and isinstance(b, str)):
        raise ValueError(f"invalid operation: {op} (mismatched types {_type(a)} and {_type(b)})")
    return bool({"contains": b in a, "startsWith": a.startswith(b), "endsWith": a.endswith(b)}[op])


def _fetch(base: Any, key: Any, optional: bool) -> Any:
    if base is None:
        if optional:
            raise _NilChain
        raise ValueError(f"cannot fetch {go_text(key)} from <nil>")
    if isinstance(base, dict):
        if not isinstance(key, str):
            raise ValueError(f"cannot use {_type(key)} to get an element from map")
        return base.get(key)
    if isinstance(base, list):
        if not isinstance(key, int) or isinstance(key, bool):
            raise ValueError(
                f"array elements can only be selected using an integer (got {_type(key)})"
            )
        index = key + len(base) if key < 0 else key
        if not 0 <= index < len(base):
            raise ValueError(f"index out of range: {key} (array length is {len(base)})")
        return base[index]
    if isinstance(base, str) and isinstance(key, int):
        raise UnsupportedConstruct("indexing a string is not evaluated locally")
    raise ValueError(f"cannot fetch {go_text(key)} from {_type(base)}")


def _truth(op: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{op} needs a boolean, got {_type(v)} {go_text(v)!r}")
    return v


class Evaluator:
    """Evaluates trees over ``env`` (nested maps of strings, as Argo expands its scope);
    ``unknown(name)`` is the value of a top-level name that is not there."""

    def __init__(self, env: Mapping[str, Any], unknown: Callable[[str], Any]) -> None:
        self.env, self.unknown = env, unknown
        self.frames: list[tuple[Any, int]] = []  # closure element and index

    def run(self, node: Node) -> Any:
        try:
            return self.visit(node)
        except (ValueError, TypeError, ZeroDivisionError, OverflowError) as e:
            raise ExprError(str(e)) from None

    def visit(self, node: Node) -> Any:
        method: Callable[[Node], Any] = getattr(self, "_" + node.kind)
        return method(node)

    def _lit(self, node: Node) -> Any:
        return node.value

    def _name(self, node: Node) -> Any:
        if node.value in self.env:
            return self.env[node.value]
        if node.value in _FUNCS:
            raise UnsupportedConstruct(f"{node.value} used as a value is not evaluated locally")
        return self.unknown(node.value)

    def _pointer(self, node: Node) -> Any:
        element, index = self.frames[-1]
        return index if node.value == "index" else element

    def _array(self, node: Node) -> list[Any]:
        return [self.visit(n) for n in node.args]

    def _map(self, node: Node) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for pair in node.args:
            key = self.visit(pair.args[0])
            if not isinstance(key, str):
                raise UnsupportedConstruct("map literals with non-string keys are not run locally")
            out[key] = self.visit(pair.args[1])
        return out

    def _member(self, node: Node) -> Any:
        return _fetch(self.visit(node.args[0]), self.visit(node.args[1]), node.optional)

    def _chain(self, node: Node) -> Any:
        try:
            return self.visit(node.args[0])
        except _NilChain:
            return None

    def _slice(self, node: Node) -> Any:
        base, low, high = (self.visit(n) for n in node.args)
        if not isinstance(base, list | str):
            raise ValueError(f"cannot slice {_type(base)}")
        if isinstance(base, str) and not base.isascii():
            raise UnsupportedConstruct("slicing a non-ASCII string is not evaluated locally")
        size = len(base)
        bounds = [size if high is None else _as_int(high), 0 if low is None else _as_int(low)]
        b, a = (max(0, x + size if x < 0 else x) for x in bounds)
        b = min(b, size)
        return base[min(a, b) : b]

    def _unary(self, node: Node) -> Any:
        value = self.visit(node.args[0])
        if node.value == "not":
            return not _truth("!", value)
        if not _is_number(value):
            raise ValueError(f"invalid operation: {node.value} (mismatched type {_type(value)})")
        return -value if node.value == "-" else value

    def _binary(self, node: Node) -> Any:
        op = node.value
        left = self.visit(node.args[0])
        if op in ("and", "or"):
            if _truth(op, left) == (op == "or"):
                return left
            return _truth(op, self.visit(node.args[1]))
        if op == "??":
            return left if left is not None else self.visit(node.args[1])
        right = self.visit(node.args[1])
        if op in ("==", "!="):
            return equal(left, right) == (op == "==")
        if op in ("<", "<=", ">", ">="):
            return _compare(op, left, right)
        if op == "in":
            return _contains(right, left)
        if op in ("contains", "startsWith", "endsWith"):
            return _strings(op, left, right)
        return _arithmetic(op, left, right)

    def _cond(self, node: Node) -> Any:
        chosen = node.args[1] if _truth("?:", self.visit(node.args[0])) else node.args[2]
        return self.visit(chosen)

    def _call(self, node: Node) -> Any:
        args = [self.visit(n) for n in node.args]
        try:
            return _FUNCS[node.value](*args)
        except TypeError:
            raise ValueError(f"{node.value}() does not take {len(args)} argument(s)") from None

    def _predicate(self, node: Node) -> Any:
        items = self.visit(node.args[0])
        if not isinstance(items, list):
            raise ValueError(f"builtin {node.value} takes only array (got {_type(items)})")
        body = node.args[1] if len(node.args) > 1 else Node("pointer", "")
        results: list[Any] = []
        for i, item in enumerate(items):
            self.frames.append((item, i))
            try:
                value = self.visit(body)
            finally:
                self.frames.pop()
            if node.value != "map":
                value = _truth(f"the predicate of {node.value}", value)
                if node.value in ("all", "any", "none") and value == (node.value != "all"):
                    return node.value == "any"
            results.append(value)
        return self._summary(node.value, items, results)

    @staticmethod
    def _summary(name: str, items: list[Any], results: list[Any]) -> Any:
        if name == "map":
            return results
        if name == "filter":
            return [item for item, keep in zip(items, results, strict=True) if keep]
        if name in ("count", "one"):
            n = sum(1 for r in results if r)
            return n if name == "count" else n == 1
        return name != "any"  # all, none: no element broke them; any: none held
