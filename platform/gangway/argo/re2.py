"""Go's regexp (RE2 syntax), as Argo's ``=~`` / ``!~`` (govaluate) compile it, run with Python.

A pattern is rewritten into a Python pattern that matches the same strings, or refused:
constructs Go rejects (look-arounds, back-references, possessive repeats, ``\\Z``...) fail
there too, and constructs the two engines read differently are translated (``$`` is the end
of the text, ``\\d`` ``\\w`` ``\\s`` ``\\b`` are ASCII, ``(?<name>...)``, ``\\z``, ``\\Q...\\E``,
``\\x{...}``, POSIX classes) or refused (Unicode classes ``\\pL``, flags other than ``i``
``m`` ``s`` at the start, ``(?U)``...). A match is Go's ``MatchString``: anywhere in the text.
"""

from __future__ import annotations

import re
from functools import lru_cache

from gangway.errors import UnsupportedConstruct

__all__ = ["re2_search"]

_WORD = "0-9A-Za-z_"
_CLASSES = {"d": "0-9", "w": _WORD, "s": "\\t\\n\\f\\r "}
"""Go's Perl classes: ASCII only (``\\s`` has no ``\\v``, unlike Python's)."""
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": _WORD,
    "xdigit": "0-9A-Fa-f",
}
_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NOT_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_SAME = set("aftnrv")
"""Escapes that mean the same in both: ``\\a \\f \\t \\n \\r \\v``."""
_COUNT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


class _Refused(Exception):
    """A construct of the pattern, and why it cannot be run here."""


def re2_search(pattern: str, text: str, *, where: str) -> bool:
    """Whether Go's ``regexp.MatchString(pattern, text)`` holds."""
    return _compiled(pattern, where).search(text) is not None


@lru_cache(maxsize=256)
def _compiled(pattern: str, where: str) -> re.Pattern[str]:
    try:
        translated = _translate(pattern)
        return re.compile(translated)
    except _Refused as e:
        raise UnsupportedConstruct(f"{where}: regexp {pattern!r}: {e}") from None
    except re.error as e:
        raise UnsupportedConstruct(f"{where}: regexp {pattern!r} does not compile: {e}") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    multiline = False
    lead = re.match(r"\(\?([a-zA-Z]+)\)", pattern)
    if lead:
        flags = lead.group(1)
        if set(flags) - set("ims"):
            raise _Refused(f"flags ({flags}) other than i, m, s are not run locally")
        multiline = "m" in flags
        out.append(lead.group(0))
        i = lead.end()
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i, in_class=False)
            out.append(text)
        elif c == "[":
            text, i = _char_class(pattern, i)
            out.append(text)
        elif c == "(":
            text, i = _group(pattern, i)
            out.append(text)
        elif c == "$":
            out.append("$" if multiline else r"\Z")
            i += 1
        elif c == "{":
            text, i = _count(pattern, i)
            out.append(text)
        elif c in "*+?" and pattern[i + 1 : i + 2] == "+":
            raise _Refused(f"{c}+ (possessive repetition) is not valid in Go")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _count(pattern: str, i: int) -> tuple[str, int]:
    m = _COUNT.match(pattern, i)
    if m is None:  # a literal '{' in both
        return r"\{", i + 1
    low, comma, high = m.groups()
    if not low:
        if comma:
            raise _Refused("{,n} is a literal in Go but a repetition in Python")
        return re.escape(m.group(0)), m.end()
    if max(int(low), int(high or 0)) > 1000:
        raise _Refused("a repetition count over 1000 is not valid in Go")
    if pattern[m.end() : m.end() + 1] == "+":
        raise _Refused("{n}+ (possessive repetition) is not valid in Go")
    return m.group(0), m.end()


def _group(pattern: str, i: int) -> tuple[str, int]:
    if pattern[i + 1 : i + 2] != "?":
        return "(", i + 1
    rest = pattern[i + 2 :]
    if rest.startswith(":"):
        return "(?:", i + 3
    named = re.match(r"P?<([A-Za-z_]\w*)>", rest)
    if named:
        return f"(?P<{named.group(1)}>", i + 2 + named.end()
    scoped = re.match(r"([is]+):", rest)
    if scoped:
        return f"(?{scoped.group(1)}:", i + 2 + scoped.end()
    if rest[:1] in ("=", "!") or rest[:2] in ("<=", "<!"):
        raise _Refused("look-around assertions are not valid in Go")
    raise _Refused(f"the group (?{rest[:3]}... is not run locally")


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """``pattern[i]`` is a backslash: the Python text for the escape, and where it ends."""
    if i + 1 >= len(pattern):
        raise _Refused("a trailing backslash is not valid in Go")
    c = pattern[i + 1]
    end = i + 2
    if not c.isascii():
        raise _Refused(f"\\{c} is not a valid escape in Go")
    if not c.isalnum():
        return "\\" + c, end
    if c in _SAME:
        return "\\" + c, end
    if c.lower() in _CLASSES:
        members = _CLASSES[c.lower()]
        if c.islower():
            return (members if in_class else f"[{members}]"), end
        if in_class:
            raise _Refused(f"\\{c} inside a character class is not run locally")
        return f"[^{members}]", end
    if c == "x":
        braced = re.match(r"\{([0-9A-Fa-f]{1,6})\}", pattern[end:])
        if braced:
            return re.escape(chr(int(braced.group(1), 16))), end + braced.end()
        if re.fullmatch(r"[0-9A-Fa-f]{2}", pattern[end : end + 2]):
            return "\\x" + pattern[end : end + 2], end + 2
        raise _Refused("\\x needs two hex digits or {hex} in Go")
    if in_class:
        raise _Refused(f"\\{c} inside a character class is not run locally")
    if c in "bB":
        return (_BOUNDARY if c == "b" else _NOT_BOUNDARY), end
    if c == "A":
        return r"\A", end
    if c == "z":
        return r"\Z", end
    if c == "Q":
        close = pattern.find("\\E", end)
        literal = pattern[end:] if close < 0 else pattern[end:close]
        return re.escape(literal), len(pattern) if close < 0 else close + 2
    if c in "pP":
        raise _Refused(f"Unicode classes (\\{c}) are not run locally")
    if c.isdigit():
        raise _Refused(f"\\{c}: back-references and octal escapes are not run locally")
    raise _Refused(f"\\{c} is not a valid escape in Go")


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    out = ["["]
    j = i + 1
    if pattern[j : j + 1] == "^":
        out.append("^")
        j += 1
    first = True
    while j < len(pattern):
        c = pattern[j]
        if c == "]" and not first:
            out.append("]")
            return "".join(out), j + 1
        first = False
        posix = re.match(r"\[:(\^?)([a-z]+):\]", pattern[j:])
        if posix:
            if posix.group(1) or posix.group(2) not in _POSIX:
                raise _Refused(f"the class {posix.group(0)} is not run locally")
            out.append(_POSIX[posix.group(2)])
            j += posix.end()
        elif c == "\\":
            text, j = _escape(pattern, j, in_class=True)
            out.append(text)
        elif c in "[&~|]":
            out.append("\\" + c)
            j += 1
        else:
            out.append(c)
            j += 1
    raise _Refused("a character class without its closing ] is not valid in Go")
