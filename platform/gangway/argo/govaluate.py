"""A ``when`` condition, read as Argo reads it: govaluate (Knetic/govaluate, the version Argo
v4 pins) over the text left once the placeholders are filled, with every bare word turned
into a string (``heads == heads``; workflow/controller ``shouldExecute``).

govaluate's grammar: numbers (all float64), ``'...'``/``"..."`` strings (backslash escapes),
``true``/``false``, ``[escaped words]``, ``( )``, ``,`` lists for ``in``; operators by
precedence ``,`` < ``? : ??`` < ``||`` < ``&&`` < ``== != > >= < <= =~ !~ in`` <
``& | ^`` < ``<< >>`` < ``+ -`` < ``* / %`` < ``**`` < prefix ``- ! ~``, each left to right.
Types are checked as govaluate checks them (``<`` on two numbers or two strings, ``=~`` on
strings with a Go regexp, ``&&`` on booleans, short-circuit) and a condition must yield a
boolean. What govaluate rejects (``a==-1``, ``foo-bar``, ``v1.2`` read as a field access, two
words in a row) fails here too, and a quoted string govaluate would read as a date is refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from gangway.argo.gofmt import go_text
from gangway.argo.re2 import re2_search
from gangway.errors import UnsupportedConstruct

__all__ = ["when_holds"]

_LEVELS: list[set[str]] = [
    {"?", ":", "??"},
    {"||"},
    {"&&"},
    {"==", "!=", ">", ">=", "<", "<=", "=~", "!~", "in"},
    {"&", "|", "^"},
    {"<<", ">>"},
    {"+", "-"},
    {"*", "/", "%"},
    {"**"},
]
_SYMBOLS = set().union(*_LEVELS) | {"-", "!", "~"}
_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}([ T]\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}[AP]M|(Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b.*"
)
"""The forms govaluate's ``tryParseTime`` reads as a time (ISO/RFC 3339 dates, Kitchen,
ANSIC/Unix/Ruby dates)."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # "value", "accessor", "op", "(", ")", ","
    value: Any


class WhenError(UnsupportedConstruct):
    """govaluate (so Argo) fails on this condition."""


def _fail(cond: str, why: str) -> WhenError:
    return WhenError(f"when {cond!r}: {why} (Argo's govaluate fails on it too)")


def _tokens(cond: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(cond):
        c = cond[i]
        if c.isspace():
            i += 1
        elif c.isdigit() or c == ".":
            m = re.match(r"0x[0-9A-Fa-f]+|[\d.]+", cond[i:])
            assert m is not None
            text = m.group(0)
            try:
                if not text.isascii():
                    raise ValueError(text)
                number = float(int(text, 16)) if text.startswith("0x") else float(text)
            except ValueError:
                raise _fail(cond, f"{text!r} is not a number") from None
            out.append(_Tok("value", number))
            i += m.end()
        elif c.isalpha():
            m = re.match(r"[^\W_][\w.]*", cond[i:])
            assert m is not None
            word = m.group(0)
            i += m.end()
            out.append(_word(cond, word))
        elif c in "'\"":
            text, i = _quoted(cond, i)
            if _DATE.fullmatch(text):
                raise UnsupportedConstruct(
                    f"when {cond!r}: govaluate reads {text!r} as a date, which is not "
                    "evaluated locally"
                )
            out.append(_Tok("value", text))
        elif c == "[":
            close = cond.find("]", i)
            if close < 0:
                raise _fail(cond, "an unclosed parameter bracket")
            out.append(_Tok("value", cond[i + 1 : close]))
            i = close + 1
        elif c in "(),":
            out.append(_Tok(c, c))
            i += 1
        else:
            m = re.match(r"[^\w\s()\[\]'\"]+", cond[i:])
            assert m is not None
            if m.group(0) not in _SYMBOLS:
                raise _fail(cond, f"invalid token {m.group(0)!r}")
            out.append(_Tok("op", m.group(0)))
            i += m.end()
    return out


def _word(cond: str, word: str) -> _Tok:
    if word in ("true", "false"):
        return _Tok("value", word == "true")
    if word in ("in", "IN"):
        return _Tok("op", "in")
    if "." in word:  # govaluate's field accessor, which Argo leaves as one
        if word.endswith("."):
            raise _fail(cond, f"a hanging accessor on {word!r}")
        return _Tok("accessor", word)
    return _Tok("value", word)  # a variable, which Argo turns into a string


def _quoted(cond: str, i: int) -> tuple[str, int]:
    """A string literal from ``cond[i]``; it ends at the next quote of either kind."""
    out: list[str] = []
    j = i + 1
    while j < len(cond):
        if cond[j] == "\\" and j + 1 < len(cond):
            out.append(cond[j + 1])
            j += 2
        elif cond[j] in "'\"":
            return "".join(out), j + 1
        else:
            out.append(cond[j])
            j += 1
    raise _fail(cond, "an unclosed string literal")


class _Parser:
    def __init__(self, cond: str, tokens: list[_Tok]) -> None:
        self.cond, self.toks, self.pos = cond, tokens, 0

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise _fail(self.cond, "it ends where a value is expected")
        self.pos += 1
        return tok

    def expression(self) -> Any:
        """A tree: ``("lit", v)``, ``("list", [..])``, ``(op, left, right)``, ``(prefix,)``."""
        first = self.level(0)
        if self.peek() is None or self.peek() != _Tok(",", ","):
            return first
        items = [first]
        while self.peek() == _Tok(",", ","):
            self.take()
            items.append(self.level(0))
        return ("list", items)

    def level(self, n: int) -> Any:
        if n == len(_LEVELS):
            return self.prefix()
        left = self.level(n + 1)
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.value in _LEVELS[n]:
            self.take()
            left = (tok.value, left, self.level(n + 1))
        return left

    def prefix(self) -> Any:
        tok = self.take()
        if tok.kind == "op" and tok.value in ("-", "!", "~"):
            return ("prefix" + tok.value, self.prefix())
        if tok.kind == "(":
            inner = self.expression()
            if self.take().kind != ")":
                raise _fail(self.cond, "unbalanced parentheses")
            return inner
        if tok.kind == "value":
            return ("lit", tok.value)
        if tok.kind == "accessor":
            return ("accessor", tok.value)
        raise _fail(self.cond, f"unexpected {tok.value!r}")


def _number(cond: str, op: str, *values: Any) -> list[float]:
    for v in values:
        if not isinstance(v, float):
            raise _fail(cond, f"value {go_text(v)!r} cannot be used with {op!r}: not a number")
    return list(values)


def _evaluate(cond: str, node: Any) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return [_evaluate(cond, n) for n in node[1]]
    if kind == "accessor":
        raise _fail(cond, f"{node[1]!r} reads as a field access; quote it ('{node[1]}')")
    if kind.startswith("prefix"):
        value = _evaluate(cond, node[1])
        if kind == "prefix!":
            if not isinstance(value, bool):
                raise _fail(cond, f"value {go_text(value)!r} cannot be inverted: not a boolean")
            return not value
        (number,) = _number(cond, kind[-1], value)
        return -number if kind == "prefix-" else float(~int(number))
    left = _evaluate(cond, node[1])
    short = _short_circuit(kind, left)
    if short is not _NO:
        return short
    return _binary(cond, kind, left, _evaluate(cond, node[2]))


_NO = object()


def _short_circuit(op: str, left: Any) -> Any:
    if op == "?" and left is False:
        return None
    if op == "&&" and left is False:
        return False
    if op == "||" and left is True:
        return True
    if op in ("??", ":") and left is not None:
        return left
    return _NO


def _binary(cond: str, op: str, left: Any, right: Any) -> Any:
    if op in ("==", "!="):
        return (type(left) is type(right) and left == right) == (op == "==")
    if op in ("&&", "||"):
        if not (isinstance(left, bool) and isinstance(right, bool)):
            raise _fail(cond, f"{op!r} needs two booleans")
        return left and right if op == "&&" else left or right
    if op in ("??", ":"):
        return right
    if op == "?":
        if not isinstance(left, bool):
            raise _fail(cond, "'?' needs a boolean on its left")
        return right if left else None
    if op == "in":
        if not isinstance(right, list):
            raise _fail(cond, "'in' needs a list on its right, e.g. (a, b)")
        return any(type(left) is type(v) and left == v for v in right)
    if op in ("=~", "!~"):
        if not (isinstance(left, str) and isinstance(right, str)):
            raise _fail(cond, f"{op!r} needs a string on each side")
        return re2_search(right, left, where=f"when {cond!r}") == (op == "=~")
    if op in ("<", "<=", ">", ">="):
        if not (isinstance(left, str) and isinstance(right, str)):
            left, right = _number(cond, op, left, right)
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    if op == "+" and (isinstance(left, str) or isinstance(right, str)):
        return go_text(left) + go_text(right)
    a, b = _number(cond, op, left, right)
    try:
        return _arithmetic(op, a, b)
    except (ValueError, OverflowError) as e:
        raise _fail(cond, f"{go_text(a)} {op} {go_text(b)}: {e}") from None


def _arithmetic(op: str, a: float, b: float) -> float:
    if op in ("&", "|", "^", "<<", ">>"):
        x, y = int(a), int(b)
        ops = {"&": x & y, "|": x | y, "^": x ^ y, "<<": x << y, ">>": x >> y}
        return float(ops[op])
    if op == "/":
        return a / b if b else math.copysign(math.inf, a) if a else math.nan
    if op == "%":
        return math.fmod(a, b) if b else math.nan
    if op == "**":
        try:
            return math.pow(a, b)
        except ValueError:  # Go's math.Pow: NaN for a negative base and a fraction
            return math.nan
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def when_holds(cond: str) -> bool:
    """Whether a ``when`` condition (its placeholders already filled) holds for Argo."""
    if cond == "":
        return True
    parser = _Parser(cond, _tokens(cond))
    tree = parser.expression()
    if (extra := parser.peek()) is not None:
        raise _fail(cond, f"unexpected {extra.value!r} after a complete expression")
    value = _evaluate(cond, tree)
    if not isinstance(value, bool):
        raise _fail(cond, f"expected a boolean, got {go_text(value)!r}")
    return value
