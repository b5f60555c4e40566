"""expr's syntax (expr-lang/expr v1.17, as Argo v4 vendors it: parser/lexer, parser/parser.go,
parser/operator), read into a small tree; what the evaluator does not run is refused here,
by name, before anything is evaluated.

Read: literals (ints, floats, ``'..'`` ``".."`` with Go escapes, raw backtick strings, ``nil``
``true`` ``false``, ``[..]``, ``{k: v}``), names, ``a.b``, ``a?.b``, ``a['b']``, ``a[0]``,
``a[1:2]``, calls, the closures of ``all any none one filter map count``
(``{# > 1}``, ``{.field}``, ``#index``), unary ``not ! - +`` and the binary operators with
expr's precedences: ``?:`` < ``||`` < ``&&`` < comparisons (chained: ``a < b < c``), ``in``,
``contains``, ``startsWith``, ``endsWith`` < ``+ -`` < ``* / %`` < ``** ^`` < ``??``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gangway.argo.expr_lexer import Token, lex
from gangway.errors import UnsupportedConstruct

__all__ = ["FUNCTIONS", "PREDICATES", "Node", "parse"]

FUNCTIONS: tuple[str, ...] = ("asInt", "asFloat", "string", "toJson", "jsonpath", "len")
"""Plain calls evaluated locally (Argo's helpers and expr's ``len``)."""
PREDICATES: tuple[str, ...] = ("all", "any", "none", "one", "filter", "map", "count")
"""expr's builtins that take a closure, evaluated locally."""
_OTHER_PREDICATES = ("sum", "find", "findIndex", "findLast", "findLastIndex", "groupBy", "sortBy")
_BINARY = {"||": 10, "or": 10, "&&": 15, "and": 15, "+": 30, "-": 30, "*": 60, "/": 60}
_BINARY |= {"%": 60, "**": 100, "^": 100, "??": 500, "..": 25, "|": 0}
_COMPARISON = ("==", "!=", "<", ">", "<=", ">=", "in", "matches", "contains", "startsWith")
_BINARY |= dict.fromkeys((*_COMPARISON, "endsWith"), 20)
_RIGHT = ("**", "^")
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_UNARY = {"not": 50, "!": 50, "-": 90, "+": 90}
_NOT_RUN = {
    "..": "the range operator (..)",
    "|": "the pipe operator (|)",
    "matches": "the matches operator",
    "let": "let (variable declarations)",
    "if": "if/else",
}


@dataclass(frozen=True)
class Node:
    """``kind``: lit, name, member (optional: ``?.``), chain, slice, unary, binary, cond,
    call, predicate, pointer, array, map."""

    kind: str
    value: Any = None
    args: tuple[Node, ...] = ()
    optional: bool = False


class _Refuse(UnsupportedConstruct):
    pass


class _Parser:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.toks = lex(expr)
        self.pos = 0
        self.depth = 0  # inside a closure

    @property
    def cur(self) -> Token:
        return self.toks[self.pos]

    def fail(self, why: str) -> _Refuse:
        return _Refuse(f"expression {self.expr!r}: {why}")

    def unexpected(self) -> _Refuse:
        tok = self.cur
        if tok.kind == "eof":
            return self.fail("unexpected end of expression")
        return self.fail(f"unexpected {tok.value!r} at {self.expr[tok.pos :]!r}")

    def advance(self) -> Token:
        tok = self.cur
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return tok

    def at(self, kind: str, value: Any = None) -> bool:
        return self.cur.kind == kind and (value is None or self.cur.value == value)

    def expect(self, kind: str, value: Any) -> None:
        if not self.at(kind, value):
            raise self.unexpected()
        self.advance()

    def expression(self, prec: int = 0) -> Node:
        left = self.primary()
        prev = ""
        while self.at("op"):
            op = self.cur.value
            if op in _NOT_RUN:
                raise self.fail(f"{_NOT_RUN[op]} is not evaluated locally")
            if op == "not":
                raise self.fail("'not in', 'not contains'... are not evaluated locally")
            if op not in _BINARY or _BINARY[op] < prec:
                break
            if prev == "??" and op != "??":
                raise self.fail(f"operator ({op}) and coalesce expressions (??) cannot be mixed")
            self.advance()
            if _BINARY[op] == 20:
                left = self.comparison(left, op)
            else:
                right = self.expression(_BINARY[op] + (op not in _RIGHT))
                left = Node("binary", {"&&": "and", "||": "or"}.get(op, op), (left, right))
            prev = op
        if prec == 0 and self.at("op", "?"):
            return self.conditional(left)
        return left

    def comparison(self, left: Node, op: str) -> Node:
        root: Node | None = None
        while True:
            right = self.expression(21)
            node = Node("binary", op, (left, right))
            root = node if root is None else Node("binary", "and", (root, node))
            left = right
            if not (self.at("op") and _BINARY.get(self.cur.value) == 20):
                return root
            op = self.advance().value

    def conditional(self, cond: Node) -> Node:
        self.advance()
        if self.at("op", ":"):
            raise self.fail("the ?: operator is not evaluated locally")
        then = self.expression(0)
        self.expect("op", ":")
        return Node("cond", None, (cond, then, self.expression(0)))

    def primary(self) -> Node:
        tok = self.cur
        if tok.kind == "op" and tok.value in _UNARY:
            self.advance()
            operand = self.expression(_UNARY[tok.value])
            op = "not" if tok.value == "!" else tok.value
            return self.postfix(Node("unary", op, (operand,)))
        if self.at("bracket", "("):
            self.advance()
            inner = self.expression(0)
            self.expect("bracket", ")")
            return self.postfix(inner)
        if tok.kind == "op" and tok.value in ("#", "."):
            if not self.depth:
                raise self.fail("cannot use pointer accessor outside predicate")
            name = ""
            if tok.value == "#":
                self.advance()
                if self.at("ident") and self.cur.pos == tok.pos + 1:
                    name = self.advance().value
                    if name != "index":
                        raise self.fail(f"#{name} is not evaluated locally")
            return self.postfix(Node("pointer", name))
        if tok.kind == "op" and tok.value == "::":
            raise self.fail(":: calls are not evaluated locally")
        return self.postfix(self.secondary())

    def secondary(self) -> Node:
        tok = self.advance()
        if tok.kind == "ident":
            if tok.value in ("true", "false", "nil"):
                return Node("lit", {"true": True, "false": False, "nil": None}[tok.value])
            if self.at("bracket", "("):
                return self.call(tok.value)
            return Node("name", tok.value)
        if tok.kind in ("num", "str"):
            return Node("lit", tok.value)
        if tok.kind == "bracket" and tok.value == "[":
            return Node("array", None, tuple(self.items("]")))
        if tok.kind == "bracket" and tok.value == "{":
            return self.map_literal()
        self.pos -= 1
        raise self.unexpected()

    def items(self, close: str) -> list[Node]:
        out: list[Node] = []
        while not self.at("bracket", close):
            if out:
                self.expect("op", ",")
                if self.at("bracket", close):
                    break
            out.append(self.expression(0))
        self.advance()
        return out

    def map_literal(self) -> Node:
        pairs: list[Node] = []
        while not self.at("bracket", "}"):
            if pairs:
                self.expect("op", ",")
                if self.at("bracket", "}"):
                    break
            if self.cur.kind in ("num", "str", "ident"):
                key = Node("lit", str(self.advance().value))
            elif self.at("bracket", "("):
                key = self.expression(0)
            else:
                raise self.fail("a map key must be a string, a number, a name or (expression)")
            self.expect("op", ":")
            pairs.append(Node("array", None, (key, self.expression(0))))
        self.advance()
        return Node("map", None, tuple(pairs))

    def call(self, name: str) -> Node:
        if name in (*_OTHER_PREDICATES, "reduce"):
            raise self.fail(f"the builtin {name}() is not evaluated locally")
        self.expect("bracket", "(")
        if name not in PREDICATES:
            if name not in FUNCTIONS:
                raise self.fail(
                    f"the function {name}() is not evaluated locally; "
                    f"those that are: {', '.join(FUNCTIONS + PREDICATES)}"
                )
            return Node("call", name, tuple(self.items(")")))
        args = [self.expression(0)]
        if not (name == "count" and self.at("bracket", ")")):
            self.expect("op", ",")
            args.append(self.predicate())
        if self.at("op", ","):
            self.advance()
        self.expect("bracket", ")")
        return Node("predicate", name, tuple(args))

    def predicate(self) -> Node:
        braced = self.at("bracket", "{")
        if braced:
            self.advance()
        self.depth += 1
        body = self.expression(0)
        self.depth -= 1
        if braced:
            self.expect("bracket", "}")
        return body

    def postfix(self, node: Node) -> Node:
        while True:
            tok = self.cur
            if tok.kind == "op" and tok.value in (".", "?."):
                optional = tok.value == "?."
                self.advance()
                if optional and self.at("bracket", "["):
                    node = self.index(node, optional=True)
                    continue
                prop = self.advance()
                if prop.kind not in ("ident", "op") or not re.fullmatch(
                    r"[A-Za-z_$][\w$]*", prop.value
                ):
                    raise self.fail("expected a name after '.'")
                node = self.member(node, Node("lit", prop.value), optional)
                if self.at("bracket", "("):
                    base = node.args[0] if node.kind == "member" else node.args[0].args[0]
                    if base == Node("name", "sprig"):
                        raise self.fail(
                            f"sprig functions (sprig.{prop.value}) are not evaluated locally; "
                            "use expr's own functions and operators"
                        )
                    raise self.fail(f"method calls (.{prop.value}()) are not evaluated locally")
            elif self.at("bracket", "["):
                node = self.index(node, optional=False)
            else:
                return node

    def member(self, base: Node, key: Node, optional: bool) -> Node:
        """``base.key``; a chain (``a?.b.c``) ends as a whole on a nil before a ``?.``."""
        chained = base.kind == "chain"
        inner = Node("member", None, (base.args[0] if chained else base, key), optional)
        return Node("chain", None, (inner,)) if chained or optional else inner

    def index(self, node: Node, *, optional: bool) -> Node:
        self.advance()  # [
        low: Node | None = None
        if not self.at("op", ":"):
            low = self.expression(0)
            if not self.at("op", ":"):
                self.expect("bracket", "]")
                return self.member(node, low, optional)
        self.advance()  # :
        high = None if self.at("bracket", "]") else self.expression(0)
        self.expect("bracket", "]")
        bounds = tuple(n if n is not None else Node("lit", None) for n in (low, high))
        return Node("slice", None, (node, *bounds))


def parse(expr: str) -> Node:
    """The tree of ``expr``, or :class:`UnsupportedConstruct` naming what is not run here."""
    parser = _Parser(expr)
    if parser.at("eof"):
        raise parser.fail("an empty expression")
    node = parser.expression(0)
    if not parser.at("eof"):
        raise parser.unexpected()
    return node
