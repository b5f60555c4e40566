"""Argo's expressions, evaluated as Argo evaluates them, or refused by name.

* expr (expr-lang/expr v1.17): ``{{=...}}`` tags, ``valueFrom.expression``,
  ``retryStrategy.expression``, hook expressions: :mod:`gangway.argo.expr_syntax` reads,
  :mod:`gangway.argo.expr_eval` evaluates over the scope expanded as Argo expands it
  (``tasks.a.outputs.result`` is a key of nested maps; a parent key that also has children,
  such as the JSON ``inputs.parameters``, gives way to them: util/expand), with Argo's
  helpers, ``len`` and the closures ``filter map all any none one count``;
* govaluate: ``when`` (:mod:`gangway.argo.govaluate`), ``=~`` / ``!~`` with Go's regexp
  (:mod:`gangway.argo.re2`);
* ``jsonpath()`` (:mod:`gangway.argo.jsonpath`).

A tag's value is printed as Go's ``%v`` prints it (:mod:`gangway.argo.gofmt`). Nothing is
handed to Python's ``eval``. Sprig, ``matches``, pipes and the other builtins are refused,
naming the construct.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gangway.argo.expr_eval import Evaluator, ExprError
from gangway.argo.expr_syntax import Node, parse
from gangway.argo.gofmt import go_text
from gangway.argo.govaluate import when_holds
from gangway.errors import UnsupportedConstruct

__all__ = ["ExprError", "as_text", "evaluate", "expand_expression", "expand_scope", "when_holds"]

_STRICT = object()
"""``missing`` when an unknown name is an error."""


def expand_scope(scope: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1, "a.c": 2}`` as ``{"a": {"b": 1, "c": 2}}``; a key that is also the
    parent of others (``a`` beside ``a.b``) is dropped, as Argo's util/expand drops it."""
    parents = {key[:i] for key in scope for i, ch in enumerate(key) if ch == "."}
    env: dict[str, Any] = {}
    for key in sorted(scope):
        if key in parents:
            continue
        *path, leaf = key.split(".")
        node = env
        for part in path:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = scope[key]
    return env


def _run(expr: str, tree: Node, scope: Mapping[str, Any], bare: bool, missing: Any) -> Any:
    def unknown(name: str) -> Any:
        if bare:
            return name
        if missing is not _STRICT:
            return missing
        hint = ""
        if re.search(r"\w-" + re.escape(name) + r"\b", expr):
            hint = "; a name with '-' is written with brackets, e.g. tasks['flip-coin']"
        raise ExprError(f"expression {expr!r}: unknown variable {name!r}{hint}")

    try:
        return Evaluator(expand_scope(scope), unknown).run(tree)
    except ExprError as e:
        if str(e).startswith("expression "):
            raise
        raise ExprError(f"expression {expr!r} failed: {e}") from None
    except UnsupportedConstruct as e:
        raise UnsupportedConstruct(f"expression {expr!r}: {e}") from None


def evaluate(
    expr: str, scope: Mapping[str, Any], *, bare_strings: bool = False, missing: Any = _STRICT
) -> Any:
    """The value of ``expr`` over ``scope`` (flat dotted names, e.g. ``lastRetry.exitCode``):
    ``None`` for expr's nil, ``int``/``float`` as Go keeps them apart, lists, dicts.

    ``bare_strings``: a top-level name that is not in scope is the string it spells.
    ``missing``: the value of such a name (instead of an error)."""
    return _run(expr, parse(expr.strip()), scope, bare_strings, missing)


def as_text(value: Any) -> str:
    """An expression's value as Argo writes it into a parameter: Go's ``%v``."""
    if value is None:
        raise ExprError("the expression evaluated to nil, which Argo does not accept")
    return go_text(value)


def expand_expression(body: str, scope: Mapping[str, Any]) -> str:
    """The text a ``{{=body}}`` tag becomes (util/template expressionReplace).

    Argo splits a tag holding both ``?`` and ``:`` at its first ``?`` and evaluates the part
    before it alone (its reading of a ternary); a tag where that first ``?`` is not the
    ternary's (``??``, ``?.``, a ``?`` in a string or in parentheses) is refused."""
    text = body.strip()
    tree = parse(text)
    if "?" in text and ":" in text and len(text) >= 5:
        try:
            head: Node | None = parse(text[: text.index("?")])
        except UnsupportedConstruct:
            head = None
        if not (tree.kind == "cond" and head == tree.args[0]):
            raise UnsupportedConstruct(
                f"{{{{={body}}}}}: Argo splits a tag holding '?' and ':' at its first '?', "
                "which is not this expression's ternary; not evaluated locally (write the "
                "ternary outermost, or move the other '?' into another parameter)"
            )
    return as_text(_run(text, tree, scope, False, _STRICT))
