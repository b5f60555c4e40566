"""Argo variable substitution, done the way Argo does it, and refusing what it cannot do.

``{{name}}`` is replaced by the value of ``name`` in the scope (``workflow.name``,
``workflow.uid``, ``workflow.parameters.x``, ``inputs.parameters.x``,
``tasks.t.outputs.parameters.y``, ``item``, ``item.key``); ``{{=expr}}`` is evaluated with
:mod:`gangway.local._expr`. An unknown variable is an error naming it and where it was used,
never a silent pass-through.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gangway.errors import PermanentError
from gangway.local._expr import evaluate
from gangway.local._model import UnsupportedConstruct

__all__ = [
    "SCRATCH",
    "ManifestInjection",
    "fill_known",
    "fill_manifest",
    "map_scratch",
    "substitute",
    "substitute_tree",
]

SCRATCH = "/gangway"
"""Per-step scratch space in a compiled template; locally a directory per step attempt."""

_VAR = re.compile(r"\{\{\s*(=?)(.*?)\s*\}\}", re.S)


def substitute(text: str, scope: Mapping[str, str], *, where: str) -> str:
    """Replace every ``{{...}}`` in ``text`` from ``scope``."""

    def one(m: re.Match[str]) -> str:
        is_expr, body = m.group(1), m.group(2)
        if is_expr:
            value = evaluate(body, scope)
            return str(value).lower() if isinstance(value, bool) else str(value)
        if body not in scope:
            raise UnsupportedConstruct(
                f"{where}: unknown variable {{{{{body}}}}}; known here: "
                + ", ".join(sorted(_families(scope)))
            )
        return scope[body]

    return _VAR.sub(one, text)


def substitute_tree(obj: Any, scope: Mapping[str, str], *, where: str) -> Any:
    """Substitute in every string of a JSON-like tree."""
    if isinstance(obj, str):
        return substitute(obj, scope, where=where)
    if isinstance(obj, list):
        return [substitute_tree(v, scope, where=where) for v in obj]
    if isinstance(obj, dict):
        return {k: substitute_tree(v, scope, where=f"{where}.{k}") for k, v in obj.items()}
    return obj


def _families(scope: Mapping[str, str]) -> set[str]:
    out = set()
    for key in scope:
        parts = key.split(".")
        out.add(".".join(parts[:-1]) + ".*" if len(parts) > 1 else key)
    return out


HERA_OUTPUTS = "/tmp/hera-outputs"
"""Where Hera's runner scripts write output parameters; per step attempt locally, too."""


def map_scratch(text: str, scratch: Path) -> str:
    """Point ``/gangway/...`` (as a whole argument or after ``=``) and Hera's outputs directory
    at directories of this step attempt."""
    if text == HERA_OUTPUTS or text.startswith(HERA_OUTPUTS + "/"):
        return str(scratch) + "/hera-outputs" + text[len(HERA_OUTPUTS) :]
    if text == SCRATCH or text.startswith(SCRATCH + "/"):
        return str(scratch) + text[len(SCRATCH) :]
    return text.replace("=" + SCRATCH + "/", f"={scratch}/")


def parameters_json(params: Mapping[str, str]) -> str:
    """Argo's ``{{workflow.parameters.json}}``: every workflow parameter as a JSON list."""
    return json.dumps([{"name": k, "value": v} for k, v in params.items()])


class ManifestInjection(PermanentError):
    """A value that, substituted into a manifest's text, would change its structure."""

    def __init__(self, message: str, variables: list[str]) -> None:
        super().__init__(message)
        self.variables = variables


def fill_manifest(text: str, scope: Mapping[str, str], *, where: str) -> Any:
    """Substitute ``text`` (a resource manifest, YAML) from ``scope`` and parse it — only if
    every value lands as one scalar exactly where its placeholder was.

    Argo fills a resource template's manifest as *text* before parsing it, so a value with a
    quote and a newline could add fields (``privileged: true``) or whole containers. Quoting
    cannot prevent that; comparing can: the manifest is filled once with a plain probe per
    placeholder and once with the real values, and the two trees must be the same but for the
    probes, each replaced by its value verbatim. Otherwise :class:`ManifestInjection` names the
    variables whose values are at fault.
    """
    where = f"{where}: " if where else ""
    bodies = list(dict.fromkeys(m.group(0) for m in _VAR.finditer(text)))
    values = {b: substitute(b, scope, where=where.rstrip(": ") or "manifest") for b in bodies}
    salt = secrets.token_hex(4)
    probes = {b: f"gwprobe{i}x{salt}" for i, b in enumerate(bodies)}
    try:
        benign = yaml.safe_load(_replace(text, probes))
    except yaml.YAMLError as e:
        raise PermanentError(f"{where}not valid YAML even with plain values: {e}") from None
    filled = _landed(text, benign, probes, values)
    if filled is not _BROKEN:
        return filled
    bad = [b for b in bodies if _landed(text, benign, probes, {b: values[b]}) is _BROKEN]
    names = [_name(b) for b in (bad or bodies)]
    shown = ", ".join(f"{n} = {values[b]!r:.80}" for n, b in zip(names, bad or bodies, strict=True))
    raise ManifestInjection(
        f"{where}the value of {shown} would change the manifest's structure once "
        "substituted (it must stay one value where its placeholder is; quotes, newlines, "
        "': ' or '#' can add or remove fields); use a plain value",
        names,
    )


def _name(body: str) -> str:
    return body[2:-2].strip()


def _replace(text: str, values: Mapping[str, str]) -> str:
    return _VAR.sub(lambda m: values.get(m.group(0), m.group(0)), text)


def fill_known(text: str, scope: Mapping[str, str], default: str) -> str:
    """Replace each ``{{name}}`` that ``scope`` knows; anything else (an unknown name, an
    expression) becomes ``default`` — a plain stand-in for what only a run would know."""
    return _VAR.sub(lambda m: default if m.group(1) else scope.get(m.group(2), default), text)


_BROKEN = object()
"""What :func:`_landed` returns when the values did not land where their placeholders were."""


def _landed(text: str, benign: Any, probes: Mapping[str, str], real: Mapping[str, str]) -> Any:
    """The tree of ``text`` filled with ``real`` (probes elsewhere) when it is ``benign`` with
    each probe replaced by its value and nothing else changed; else :data:`_BROKEN`."""
    fill = {b: real.get(b, probes[b]) for b in probes}
    try:
        got = yaml.safe_load(_replace(text, fill))
    except yaml.YAMLError:
        return _BROKEN
    expected = {probes[b]: v for b, v in real.items()}
    return got if _same(benign, got, expected) else _BROKEN


def _same(benign: Any, got: Any, expected: Mapping[str, str]) -> bool:
    if isinstance(benign, dict):
        if not isinstance(got, dict) or len(got) != len(benign):
            return False
        keys = {_put(k, expected) if isinstance(k, str) else k: v for k, v in benign.items()}
        return keys.keys() == got.keys() and all(
            _same(v, got[k], expected) for k, v in keys.items()
        )
    if isinstance(benign, list):
        return (
            isinstance(got, list)
            and len(got) == len(benign)
            and all(_same(b, g, expected) for b, g in zip(benign, got, strict=True))
        )
    if isinstance(benign, str) and any(p in benign for p in expected):
        if got == _put(benign, expected):
            return True
        # A placeholder alone as an unquoted value (``replicas: {{…}}``) becomes what YAML
        # reads the value as (an integer): fine, as long as it is that one scalar.
        alone = expected.get(benign)
        return (
            alone is not None and not isinstance(got, str | dict | list) and _scalar(alone) == got
        )
    return type(benign) is type(got) and bool(benign == got)


def _put(text: str, expected: Mapping[str, str]) -> str:
    for probe, value in expected.items():
        text = text.replace(probe, value)
    return text


def _scalar(value: str) -> Any:
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return None
