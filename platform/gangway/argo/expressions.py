"""A small, safe evaluator for Argo's expressions.

Argo evaluates ``expr`` (retryStrategy.expression, ``{{=...}}``, ``valueFrom.expression``) and
govaluate (``when``). The subset here: literals, dotted names looked up in a scope (and
``x['key']``), ``asInt``/``asFloat``/``string``/``toJson``/``jsonpath``, arithmetic,
comparisons, ternaries, ``in [...]``, ``&&``, ``||``, ``!``, parentheses. Anything else
(sprig, closures like ``filter``/``map``) is refused, never guessed.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from gangway.argo.errors import UnsupportedConstruct

__all__ = ["evaluate", "when_holds"]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'[^']*'|\"[^\"]*\")|(?P<name>[A-Za-z_][\w.-]*(?<![.-]))"
    r"|(?P<op>\|\||&&|==|!=|<=|>=|!|[-+*/%<>()\[\],?:]))"
)


_STRICT = object()
"""``missing`` when an unknown name is an error."""


def _as_int(v: Any) -> int:
    """Argo's ``asInt``: a base-10 integer in ASCII digits, nothing else (not ``2.9``,
    ``1_0`` or other scripts' digits, which Python's ``int`` would take)."""
    if isinstance(v, bool) or not re.fullmatch(r"[-+]?[0-9]+", str(v)):
        raise ValueError(f"asInt({v!r}): not an integer")
    return int(str(v))


def _jsonpath(doc: Any, path: str) -> Any:
    """expr's ``jsonpath(JSON, '$.a.b[0]')``: dotted keys and list indexes."""
    cur = json.loads(doc) if isinstance(doc, str) else doc
    for key, index in re.findall(r"\.([\w-]+)|\[(\d+)\]", path.removeprefix("$")):
        cur = cur[int(index)] if index else cur[key]
    return cur


_FUNCS: dict[str, Callable[..., Any]] = {
    "asInt": _as_int,
    "asFloat": float,
    "string": str,
    "toJson": lambda v: json.dumps(v, separators=(",", ":")),
    "jsonpath": _jsonpath,
}
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Mod,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.List,
    ast.Tuple,
    ast.Call,
    ast.IfExp,
)
_SUBSCRIPT = re.compile(r"""\[\s*(?:'([^']*)'|"([^"]*)")\s*\]""")
"""``tasks['flip-coin']``: expr's index by name, read as the dotted ``tasks.flip-coin``."""


def _translate(
    expr: str, scope: Mapping[str, Any], bare_strings: bool = False, missing: Any = _STRICT
) -> tuple[str, dict[str, Any]]:
    out: list[str] = []
    values: dict[str, Any] = {}
    pos = 0
    expr = _SUBSCRIPT.sub(lambda m: "." + (m.group(1) or m.group(2) or ""), expr.strip())
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise UnsupportedConstruct(f"expression {expr!r}: cannot parse at {expr[pos:]!r}")
        pos = m.end()
        if m.group("num") or m.group("str"):
            out.append(m.group("num") or m.group("str"))
            continue
        if name := m.group("name"):
            if name in _FUNCS or name in ("in", "not", "true", "false"):
                out.append({"true": "True", "false": "False"}.get(name, name))
            elif name in scope or bare_strings or missing is not _STRICT:
                key = f"_v{len(values)}"
                values[key] = scope.get(name, name if bare_strings else missing)
                out.append(key)
            elif name.startswith("sprig."):
                raise UnsupportedConstruct(
                    f"expression {expr!r}: sprig functions ({name}) are not evaluated locally; "
                    "use expr's own functions and operators"
                )
            else:
                raise UnsupportedConstruct(f"expression {expr!r}: unknown variable {name!r}")
            continue
        op = m.group("op")
        out.append({"||": " or ", "&&": " and ", "!": " not "}.get(op, op))
    return " ".join(_ternary(out, expr)), values


def _ternary(tokens: list[str], expr: str) -> list[str]:
    """expr's ``cond ? a : b`` as Python's ``(a) if (cond) else (b)``, inner groups first."""
    out: list[str] = []
    i = 0
    while i < len(tokens):  # each parenthesized group on its own
        if tokens[i] in ("(", "["):
            j = _closing(tokens, i)
            out += [tokens[i], *_ternary(tokens[i + 1 : j], expr), tokens[j]]
            i = j + 1
        else:
            out.append(tokens[i])
            i += 1
    if "?" not in out:
        return out
    q = out.index("?")
    nest = 0
    for j in range(q + 1, len(out)):
        if out[j] == "?":
            nest += 1
        elif out[j] == ":" and nest:
            nest -= 1
        elif out[j] == ":":
            cond, then, other = out[:q], out[q + 1 : j], _ternary(out[j + 1 :], expr)
            return ["(", *then, ")", " if ", "(", *cond, ")", " else ", "(", *other, ")"]
    raise UnsupportedConstruct(f"expression {expr!r}: a '?' without its ':'")


def _closing(tokens: list[str], i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j] in ("(", "[")
        depth -= tokens[j] in (")", "]")
        if depth == 0:
            return j
    return len(tokens) - 1


def evaluate(
    expr: str, scope: Mapping[str, Any], *, bare_strings: bool = False, missing: Any = _STRICT
) -> Any:
    """Evaluate ``expr`` with dotted names from ``scope`` (e.g. ``lastRetry.exitCode``).

    ``bare_strings``: a name that is not in scope is the string it spells, as in a ``when``
    (govaluate, as Argo runs it: ``{{tasks.flip.outputs.result}} == heads``). ``missing``: the
    value of a name not in scope (expr's nil for an absent key, as in the branch of a
    ternary not taken), else such a name is an error."""
    text, values = _translate(expr, scope, bare_strings, missing)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise UnsupportedConstruct(f"expression {expr!r} is not supported locally") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise UnsupportedConstruct(
                f"expression {expr!r}: {type(node).__name__} is not supported locally"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCS
        ):
            raise UnsupportedConstruct(
                f"expression {expr!r}: only {', '.join(_FUNCS)} calls are evaluated locally"
            )
    try:
        return eval(compile(tree, "<argo-expr>", "eval"), {"__builtins__": {}, **_FUNCS}, values)
    except (ValueError, TypeError, ZeroDivisionError) as e:
        raise UnsupportedConstruct(f"expression {expr!r} failed: {e}") from None
    except (KeyError, IndexError) as e:
        raise UnsupportedConstruct(f"expression {expr!r}: jsonpath finds no {e}") from None


def when_holds(condition: str) -> bool:
    """A ``when`` condition, its placeholders already filled: govaluate's reading, bare words
    as strings, numbers compared as numbers."""
    value = evaluate(condition, {}, bare_strings=True)
    if isinstance(value, str):
        value = value.strip().lower() == "true"
    return bool(value)
