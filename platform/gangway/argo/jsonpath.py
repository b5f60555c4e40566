"""Argo's ``jsonpath(json, path)`` helper (util/expr/env): github.com/evilmonkeyinc/jsonpath
v0.8, over the JSON text decoded as Go decodes it (every number a float64).

Read: ``$``, ``.key``, ``['key']``, ``[n]`` (negative from the end; on a map, the n-th key in
order), ``.*`` / ``[*]``, ``.length``, and filters ``[?(...)]`` over a list or a map's values:
``@`` / ``$`` paths, numbers, ``'..'`` / ``".."`` strings, ``true`` ``false`` ``null``,
``== != < <= > >=``, ``&&`` ``||``, parentheses. As in the library, ``==`` compares two
numbers by value and anything else by its text (a string is never equal to a number),
``<`` wants two numbers, ``&&``/``||`` evaluate both sides, an element whose filter fails (a
missing key, a string compared with ``<``) is left out, and after a wildcard or a filter the
rest of the path runs on each element (an index picks among the filtered ones). Unions,
ranges, ``..``, scripts ``[(...)]``, arithmetic and ``=~`` in filters are refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from gangway.argo.gofmt import go_text
from gangway.errors import UnsupportedConstruct

__all__ = ["jsonpath"]

_SEGMENT = re.compile(
    r"\.\.|\.\*|\[\*\]|\.length\b(?![\w$])|\.([\w$]+)|\[\s*'([^']*)'\s*\]|\[(-?\d+)\]|\[\?\("
)
_TOKEN = re.compile(
    r"\s*(?:(\|\||&&|==|!=|<=|>=|<|>|\(|\))|([@$])|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|'([^']*)'|\"([^\"]*)\"|(true|false|null|nil)\b)"
)
_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOLS |= {"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_NIL = object()
"""A filter literal ``null``/``nil``."""


class _Miss(Exception):
    """The path does not apply to this value (a missing key, an index out of range...)."""


def _reject(name: str) -> Any:
    raise ValueError(f"invalid JSON value {name}")


def jsonpath(doc: str, path: str) -> Any:
    """What Argo's ``jsonpath(doc, path)`` returns."""
    try:
        data = json.loads(doc, parse_int=float, parse_constant=_reject)
    except ValueError as e:
        raise ValueError(f"jsonpath: the document is not JSON: {e}") from None
    steps = _steps(path.strip(), path)
    if not steps or steps[0] != ("root",):
        raise UnsupportedConstruct(f"jsonpath {path!r}: a path starts with $")
    try:
        return _apply(data, data, steps[1:])
    except _Miss as e:
        raise ValueError(f"jsonpath {path!r}: {e}") from None


Step = tuple[Any, ...]


def _steps(text: str, path: str) -> list[Step]:
    """``$.a[0][?(@.b == 1)]`` as ``[("root",), ("key", "a"), ("index", 0), ("filter", ..)]``."""
    if not text or text[0] not in "$@":
        raise UnsupportedConstruct(f"jsonpath {path!r}: expected $ or @ at {text!r}")
    out: list[Step] = [("root",) if text[0] == "$" else ("current",)]
    i = 1
    while i < len(text):
        m = _SEGMENT.match(text, i)
        if m is None:
            raise UnsupportedConstruct(
                f"jsonpath {path!r}: {text[i:]!r} is not read locally (unions, ranges, "
                "scripts and [\"key\"] are not; write ['key'])"
            )
        seg = m.group(0)
        if seg == "..":
            raise UnsupportedConstruct(f"jsonpath {path!r}: recursive descent (..) is not read")
        if seg in (".*", "[*]"):
            out.append(("wildcard",))
        elif seg.startswith(".length"):
            out.append(("length",))
        elif seg == "[?(":
            close = _closing(text, m.end(), path)
            out.append(("filter", _Filter(text[m.end() : close], path).parse()))
            m = re.compile(r"\)\s*\]").match(text, close)
            if m is None:
                raise UnsupportedConstruct(f"jsonpath {path!r}: a filter ends with )]")
        elif m.group(3) is not None:
            out.append(("index", int(m.group(3))))
        else:
            out.append(("key", m.group(1) if m.group(1) is not None else m.group(2)))
        i = m.end()
    return out


def _closing(text: str, start: int, path: str) -> int:
    depth, quote = 1, ""
    for j in range(start, len(text)):
        c = text[j]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0:
                return j
    raise UnsupportedConstruct(f"jsonpath {path!r}: a filter without its closing )")


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    if isinstance(value, list):
        return list(value)
    raise _Miss(f"cannot select the elements of {go_text(value)!r}")


def _apply(root: Any, value: Any, steps: list[Step]) -> Any:
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    kind = step[0]
    if kind in ("wildcard", "filter"):
        items = _children(value)
        if kind == "filter":
            items = [item for item in items if _holds(step[1], root, item)]
            if rest and rest[0][0] == "index":
                return _apply(root, items, rest)
        if not rest:
            return items
        return [r for r in (_quiet(root, item, rest) for item in items) if r is not None]
    return _apply(root, _one(step, value), rest)


def _one(step: Step, value: Any) -> Any:
    kind = step[0]
    if kind == "key":
        if not isinstance(value, dict) or step[1] not in value:
            raise _Miss(f"key {step[1]!r} not found")
        return value[step[1]]
    if kind == "length":
        if isinstance(value, dict) and "length" in value:
            return value["length"]
        if isinstance(value, str) and not value.isascii():
            raise UnsupportedConstruct("jsonpath .length of a non-ASCII string is not read")
        if not isinstance(value, dict | list | str):
            raise _Miss("length of a value that has none")
        return len(value)
    if kind == "index":
        items = [value[k] for k in sorted(value)] if isinstance(value, dict) else value
        if isinstance(items, str) and not items.isascii():
            raise UnsupportedConstruct("jsonpath indexes into a non-ASCII string are not read")
        if not isinstance(items, list | str):
            raise _Miss(f"index {step[1]} of {go_text(value)!r}")
        index = step[1] + len(items) if step[1] < 0 else step[1]
        if not 0 <= index < len(items):
            raise _Miss(f"index {step[1]} out of range")
        return items[index]
    return value  # root / current: handled by the caller


def _quiet(root: Any, value: Any, steps: list[Step]) -> Any:
    try:
        return _apply(root, value, steps)
    except _Miss:
        return None


class _Filter:
    """A filter's expression as a tree: ``("or"|"and", l, r)``, ``(cmp, l, r)``,
    ``("path", steps)``, ``("lit", value)``."""

    def __init__(self, text: str, path: str) -> None:
        self.text, self.path, self.pos = text, path, 0
        self.toks: list[tuple[str, Any]] = []
        while text[self.pos :].strip():
            self.toks.append(self._token())
        self.i = 0

    def _refuse(self, what: str) -> UnsupportedConstruct:
        return UnsupportedConstruct(f"jsonpath {self.path!r}: filter {self.text!r}: {what}")

    def _token(self) -> tuple[str, Any]:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            rest = self.text[self.pos :].strip()
            what = "=~" if rest.startswith("=~") else repr(rest[:12])
            raise self._refuse(f"{what} is not read locally (no arithmetic, =~ or lists)")
        self.pos = m.end()
        op, anchor, number, sq, dq, word = m.groups()
        if op:
            return ("op", op)
        if anchor:
            seg = re.compile(r"(?:\.[\w$]+|\.\*|\[\*\]|\['[^']*'\]|\[-?\d+\])*").match(
                self.text, self.pos
            )
            assert seg is not None
            self.pos = seg.end()
            return ("path", _steps(anchor + seg.group(0), self.path))
        if number is not None:
            return ("lit", float(number))
        if sq is not None or dq is not None:
            return ("lit", sq if sq is not None else dq)
        return ("lit", {"true": True, "false": False}.get(word, _NIL))

    def parse(self) -> Any:
        if not self.toks:
            raise self._refuse("an empty filter")
        tree = self._level(("||",), lambda: self._level(("&&",), self._comparison))
        if self.i != len(self.toks):
            raise self._refuse(f"unexpected {self.toks[self.i][1]!r}")
        return tree

    def _level(self, ops: tuple[str, ...], sub: Callable[[], Any]) -> Any:
        left = sub()
        while self.i < len(self.toks) and self.toks[self.i] in [("op", o) for o in ops]:
            op = self.toks[self.i][1]
            self.i += 1
            left = ("or" if op == "||" else "and", left, sub())
        return left

    def _comparison(self) -> Any:
        left = self._operand()
        if self.i < len(self.toks) and self.toks[self.i][1] in ("==", "!=", "<", "<=", ">", ">="):
            op = self.toks[self.i][1]
            self.i += 1
            left = (op, left, self._operand())
            if self.i < len(self.toks) and self.toks[self.i][1] not in ("&&", "||", ")"):
                raise self._refuse("chained comparisons are not read locally")
        return left

    def _operand(self) -> Any:
        if self.i >= len(self.toks):
            raise self._refuse("it ends where a value is expected")
        kind, value = self.toks[self.i]
        self.i += 1
        if (kind, value) == ("op", "("):
            inner = self._level(("||",), lambda: self._level(("&&",), self._comparison))
            if self.i >= len(self.toks) or self.toks[self.i] != ("op", ")"):
                raise self._refuse("unbalanced parentheses")
            self.i += 1
            return inner
        if kind == "op":
            raise self._refuse(f"unexpected {value!r}")
        return (kind, value)


def _value(node: Any, root: Any, current: Any) -> Any:
    """An operand's value; a path that does not apply raises :class:`_Miss`."""
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "path":
        start = root if node[1][0] == ("root",) else current
        return _apply(root, start, node[1][1:])
    return _test(node, root, current)


def _number(v: Any) -> float:
    """The library's getNumber: a number (never a string: selected strings carry quotes)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    raise _Miss("not a number")


def _text(v: Any, literal: bool) -> str:
    """The library's getString: strings in single quotes (a selected one that has them
    already kept as it is), anything else as Go's %v."""
    if v is _NIL:
        return "<nil>"
    if isinstance(v, str):
        return v if not literal and len(v) > 1 and v[0] == v[-1] == "'" else f"'{v}'"
    return go_text(v)


def _test(node: Any, root: Any, current: Any) -> Any:
    op, left, right = node
    a, b = _value(left, root, current), _value(right, root, current)
    if op in ("and", "or"):
        x, y = _boolean(a), _boolean(b)
        return x and y if op == "and" else x or y
    if op in ("==", "!="):
        try:
            same = _number(a) == _number(b)
        except _Miss:
            same = _text(a, left[0] == "lit") == _text(b, right[0] == "lit")
        return same == (op == "==")
    p, q = _number(a), _number(b)
    return {"<": p < q, "<=": p <= q, ">": p > q, ">=": p >= q}[op]


def _boolean(v: Any) -> bool:
    """The library's getBoolean: nil is false, else the text must read as a Go bool."""
    if v is None or v is _NIL:
        return False
    text = _text(v, False) if isinstance(v, str) else go_text(v)
    if text not in _BOOLS:
        raise _Miss(f"{text} is not a boolean")
    return _BOOLS[text]


def _holds(tree: Any, root: Any, item: Any) -> bool:
    try:
        value = _value(tree, root, item)
    except _Miss:
        return False
    if value is None or value is _NIL:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, list | dict | str):
        return len(value) > 0
    return bool(value)
