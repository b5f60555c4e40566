"""A DAG task's ``depends`` clause (Argo's enhanced depends logic), parsed once and evaluated
over the states of the tasks it names — the one reading of it for the executor and the linter.

Grammar: operands ``task`` or ``task.RESULT`` (RESULT one of :data:`RESULTS`), combined with
``&&``, ``||``, ``!`` and parentheses. A bare ``task`` means
``(task.Succeeded || task.Skipped || task.Daemoned)``, and, as Argo expands it, also
``task.Failed`` / ``task.Errored`` when that task has ``continueOn.failed`` / ``.error``.
``dependencies: [a, b]`` is the clause ``a && b``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangway.errors import UnsupportedConstruct

__all__ = ["RESULTS", "Depends", "TaskState", "parse_depends", "task_depends"]

RESULTS = (
    "Succeeded",
    "Failed",
    "Errored",
    "Skipped",
    "Omitted",
    "Daemoned",
    "AnySucceeded",
    "AllFailed",
)
_TOKEN = re.compile(r"\s*(?:(\|\||&&|!|\(|\))|([A-Za-z0-9][\w-]*)(?:\.([A-Za-z]+))?)")
_PHASE = {"Errored": "Error"}


@dataclass(frozen=True)
class TaskState:
    """How a task ended: its phase, its items' phases when it fanned out, whether it is a
    running daemon, and what its ``continueOn`` lets a bare dependency accept."""

    phase: str
    items: tuple[str, ...] = ()
    daemoned: bool = False
    continue_on: frozenset[str] = frozenset()
    """``{"Failed", "Error"}`` or a part of it."""

    def has(self, result: str | None) -> bool:
        if result is None:
            ok = {"Succeeded", "Skipped", *self.continue_on}
            return self.phase in ok or self.daemoned
        if result == "Daemoned":
            return self.daemoned
        if result == "AnySucceeded":
            return any(p == "Succeeded" for p in self.items or (self.phase,))
        if result == "AllFailed":
            items = self.items or (self.phase,)
            return bool(items) and all(p in ("Failed", "Error") for p in items)
        return self.phase == _PHASE.get(result, result)


@dataclass(frozen=True)
class Depends:
    """A parsed clause: :attr:`tasks` it names, :meth:`holds` once they have all ended."""

    clause: str
    tree: Any
    tasks: tuple[str, ...]

    def holds(self, states: Mapping[str, TaskState]) -> bool:
        return bool(_eval(self.tree, states))


def parse_depends(clause: str, *, where: str) -> Depends:
    """Parse ``clause``; a malformed one raises :class:`UnsupportedConstruct` naming it."""
    tokens = _tokens(clause, where)
    pos, tree = _or(tokens, 0, clause, where)
    if pos != len(tokens):
        raise _bad(clause, where, f"unexpected {_show(tokens[pos])!r}")
    names: dict[str, None] = {}
    _collect(tree, names)
    return Depends(clause, tree, tuple(names))


def task_depends(task: Mapping[str, Any], *, where: str) -> Depends:
    """The clause of a DAG task: its ``depends``, else its ``dependencies`` joined by ``&&``."""
    if task.get("depends"):
        return parse_depends(str(task["depends"]), where=where)
    deps: Sequence[Any] = task.get("dependencies") or []
    return parse_depends(" && ".join(str(d) for d in deps), where=where) if deps else _NONE


_NONE = Depends("", ("true",), ())


def _bad(clause: str, where: str, why: str) -> UnsupportedConstruct:
    return UnsupportedConstruct(
        f"{where}: depends {clause!r} is not valid: {why} (operands are TASK or "
        f"TASK.RESULT with RESULT one of {', '.join(RESULTS)}; operators &&, ||, !, ( ))"
    )


def _tokens(clause: str, where: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = clause.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _bad(clause, where, f"cannot read {text[pos:].strip()!r}")
        pos = m.end()
        if m.group(1):
            out.append(("op", m.group(1)))
            continue
        result = m.group(3)
        if result is not None and result not in RESULTS:
            raise _bad(clause, where, f"{m.group(2)}.{result}: unknown result {result!r}")
        out.append(("task", (m.group(2), result)))
    if not out:
        raise _bad(clause, where, "it is empty")
    return out


def _or(tokens: list[tuple[str, Any]], pos: int, clause: str, where: str) -> tuple[int, Any]:
    pos, left = _and(tokens, pos, clause, where)
    while pos < len(tokens) and tokens[pos] == ("op", "||"):
        pos, right = _and(tokens, pos + 1, clause, where)
        left = ("or", left, right)
    return pos, left


def _and(tokens: list[tuple[str, Any]], pos: int, clause: str, where: str) -> tuple[int, Any]:
    pos, left = _unary(tokens, pos, clause, where)
    while pos < len(tokens) and tokens[pos] == ("op", "&&"):
        pos, right = _unary(tokens, pos + 1, clause, where)
        left = ("and", left, right)
    return pos, left


def _unary(tokens: list[tuple[str, Any]], pos: int, clause: str, where: str) -> tuple[int, Any]:
    if pos >= len(tokens):
        raise _bad(clause, where, "it ends too early")
    kind, value = tokens[pos]
    if (kind, value) == ("op", "!"):
        pos, inner = _unary(tokens, pos + 1, clause, where)
        return pos, ("not", inner)
    if (kind, value) == ("op", "("):
        pos, inner = _or(tokens, pos + 1, clause, where)
        if pos >= len(tokens) or tokens[pos] != ("op", ")"):
            raise _bad(clause, where, "a '(' is not closed")
        return pos + 1, inner
    if kind == "task":
        return pos + 1, ("task", *value)
    raise _bad(clause, where, f"unexpected {_show(tokens[pos])!r}")


def _show(token: tuple[str, Any]) -> str:
    kind, value = token
    return ".".join(v for v in value if v) if kind == "task" else str(value)


def _collect(tree: Any, names: dict[str, None]) -> None:
    """The tasks ``tree`` names, in the order they first appear (a dict keeps it)."""
    if tree[0] == "task":
        names.setdefault(tree[1], None)
    elif tree[0] == "not":
        _collect(tree[1], names)
    elif tree[0] in ("and", "or"):
        _collect(tree[1], names)
        _collect(tree[2], names)


def _eval(tree: Any, states: Mapping[str, TaskState]) -> bool:
    op = tree[0]
    if op == "true":
        return True
    if op == "task":
        state = states.get(tree[1])
        return state is not None and state.has(tree[2])
    if op == "not":
        return not _eval(tree[1], states)
    if op == "and":
        return _eval(tree[1], states) and _eval(tree[2], states)
    return _eval(tree[1], states) or _eval(tree[2], states)
