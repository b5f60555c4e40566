"""expr's lexer (expr-lang/expr v1.17 parser/lexer): numbers (``1_000``, ``0x2A``, ``.5``,
``1e3``), strings with Go's escapes, raw backtick strings, names, comments, operators."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gangway.errors import UnsupportedConstruct

__all__ = ["Token", "lex"]

_WORD_OPS = frozenset(
    ("in", "or", "and", "matches", "contains", "startsWith", "endsWith", "let", "if", "else")
) | {"not"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_ESCAPES |= {"\\": "\\", "'": "'", '"': '"'}
_OPERATOR = re.compile(r"\?\?|\?\.|\.\.|\|\||&&|==|!=|<=|>=|\*\*|::|[-+*/%^,;:?.<>=!|&]")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|(?:[0-9][0-9_]*(?:\.(?!\.)[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?"
)


@dataclass(frozen=True)
class Token:
    kind: str  # num, str, ident, op, bracket, eof
    value: Any
    pos: int


def _bad(expr: str, why: str) -> UnsupportedConstruct:
    return UnsupportedConstruct(f"expression {expr!r}: {why}")


def _unescape(text: str, expr: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        hexlen = {"x": 2, "u": 4, "U": 8}.get(nxt)
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif hexlen and re.fullmatch(rf"[0-9a-fA-F]{{{hexlen}}}", text[i + 2 : i + 2 + hexlen]):
            out.append(chr(int(text[i + 2 : i + 2 + hexlen], 16)))
            i += 2 + hexlen
        elif re.fullmatch(r"[0-7]{3}", text[i + 1 : i + 4]):
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            raise UnsupportedConstruct(f"expression {expr!r}: invalid escape \\{nxt} in a string")
    return "".join(out)


def lex(expr: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(expr):
        c = expr[i]
        if c.isspace():
            i += 1
            continue
        start = i
        if c in "'\"":
            m = re.compile(rf"{c}((?:[^{c}\\]|\\.)*){c}", re.S).match(expr, i)
            if m is None:
                raise UnsupportedConstruct(
                    f"expression {expr!r}: a string without its closing quote"
                )
            out.append(Token("str", _unescape(m.group(1), expr), start))
            i = m.end()
        elif c == "`":
            close = expr.find("`", i + 1)
            if close < 0:
                raise UnsupportedConstruct(
                    f"expression {expr!r}: a raw string without its closing `"
                )
            out.append(Token("str", expr[i + 1 : close], start))
            i = close + 1
        elif c in "0123456789" or (c == "." and expr[i + 1 : i + 2] in tuple("0123456789")):
            i = _lex_number(expr, i, out)
        elif c.isalpha() or c in "_$":
            m = re.compile(r"[\w$]+").match(expr, i)
            assert m is not None
            word = m.group(0)
            out.append(Token("op" if word in _WORD_OPS else "ident", word, start))
            i = m.end()
        elif c == "#":
            m = re.compile(r"#([\w$]*)").match(expr, i)
            assert m is not None
            out.append(Token("op", "#", start))
            if m.group(1):
                out.append(Token("ident", m.group(1), start + 1))
            i = m.end()
        elif c in "([{)]}":
            out.append(Token("bracket", c, start))
            i += 1
        elif expr.startswith(("//", "/*"), i):
            close = len(expr) if expr[i + 1] == "/" else expr.find("*/", i + 2)
            if close < 0:
                raise UnsupportedConstruct(f"expression {expr!r}: an unclosed comment")
            i = expr.find("\n", i) if expr[i + 1] == "/" and "\n" in expr[i:] else close + 2
        else:
            op = _OPERATOR.match(expr, i)
            if op is None:
                raise UnsupportedConstruct(f"expression {expr!r}: unrecognized character {c!r}")
            out.append(Token("op", op.group(0), start))
            i = op.end()
    return [*out, Token("eof", None, len(expr))]


def _lex_number(expr: str, i: int, out: list[Token]) -> int:
    m = _NUMBER.match(expr, i)
    assert m is not None
    text = m.group(0)
    end = m.end()
    if end < len(expr) and (expr[end].isalnum() or expr[end] in "_$"):
        raise UnsupportedConstruct(f"expression {expr!r}: bad number syntax {expr[i : end + 1]!r}")
    digits = text.replace("_", "")
    try:
        if digits[:2].lower() in ("0x", "0o", "0b"):
            value: int | float = int(digits, 0)
        elif any(ch in digits for ch in ".eE"):
            value = float(digits)
        else:
            value = int(digits, 10)
    except ValueError:
        raise UnsupportedConstruct(
            f"expression {expr!r}: invalid number literal {text!r}"
        ) from None
    out.append(Token("num", value, i))
    return end
