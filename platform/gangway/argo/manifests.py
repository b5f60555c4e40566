"""Filling a resource template's manifest without letting a value change its structure."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import yaml

from gangway.argo.substitution import PLACEHOLDER, substitute
from gangway.errors import PermanentError
from gangway.user_yaml import load_yaml

__all__ = ["ManifestInjection", "fill_manifest"]


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
    bodies = list(dict.fromkeys(m.group(0) for m in PLACEHOLDER.finditer(text)))
    values = {b: substitute(b, scope, where=where.rstrip(": ") or "manifest") for b in bodies}
    salt = secrets.token_hex(4)
    probes = {b: f"gwprobe{i}x{salt}" for i, b in enumerate(bodies)}
    try:
        benign = load_yaml(_replace(text, probes))
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
    return PLACEHOLDER.sub(lambda m: values.get(m.group(0), m.group(0)), text)


_BROKEN = object()
"""What :func:`_landed` returns when the values did not land where their placeholders were."""


def _landed(text: str, benign: Any, probes: Mapping[str, str], real: Mapping[str, str]) -> Any:
    """The tree of ``text`` filled with ``real`` (probes elsewhere) when it is ``benign`` with
    each probe replaced by its value and nothing else changed; else :data:`_BROKEN`."""
    fill = {b: real.get(b, probes[b]) for b in probes}
    try:
        got = load_yaml(_replace(text, fill))
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
        return load_yaml(value)
    except yaml.YAMLError:
        return None
