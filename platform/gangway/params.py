"""Typed pipeline parameters: a Pydantic model of what a pipeline takes, compiled to Argo
parameters and checked before anything runs.

A pipeline declares its parameters once::

    class Params(PipelineParams):
        model: Literal["tiny", "small", "gpu"] = Field("tiny", description="model preset")
        train_steps: int = Field(300, ge=1, description="optimizer steps")

Each field becomes an Argo workflow parameter named in kebab case (``train-steps``) with its
default as the value, its allowed values as ``enum`` (so the Argo UI offers a dropdown) and a
``description`` saying what it is and what it accepts. The fields' JSON Schema travels in the
compiled manifest (annotation :data:`SCHEMA_ANNOTATION`), so ``gangway run``, ``submit`` and
``lint`` check ``-p`` values against it — of a Python pipeline or of its compiled YAML alike —
and report every bad value at once, with what is allowed and the nearest allowed value.

Argo parameters are text: a field is a ``str``, ``int``, ``float``, ``bool``, a ``Literal``
of one of those, or an ``Enum`` of them; anything else is refused when the pipeline is defined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from gangway.contract import LABEL_PREFIX
from gangway.errors import PermanentError, closest, field_errors
from gangway.step.interface import kebab

__all__ = [
    "SCHEMA_ANNOTATION",
    "PipelineParams",
    "argo_parameters",
    "argo_text",
    "check_values",
    "schema_json",
]

SCHEMA_ANNOTATION = f"{LABEL_PREFIX}/parameters-schema"
"""On a compiled pipeline: JSON, Argo parameter name → the JSON Schema of its values."""

_TYPES = {"string", "integer", "number", "boolean"}
_KEEP = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_KEEP_STR = ("minLength", "maxLength", "pattern")


class PipelineParams(BaseModel):
    """Base of a pipeline's parameter model: every field a workflow parameter (see the module
    text); defaults are required, since Argo starts a workflow from them."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=kebab,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    @classmethod
    def argo_schema(cls) -> dict[str, dict[str, Any]]:
        """Per Argo parameter name, the JSON Schema of its values (the part this module
        checks: type, enum, bounds, string length and pattern) and its description."""
        schema = cls.model_json_schema(by_alias=True)
        defs = schema.get("$defs", {})
        out: dict[str, dict[str, Any]] = {}
        for name, prop in schema.get("properties", {}).items():
            if "$ref" in prop:  # an Enum: its values are in $defs
                prop = {**defs[prop["$ref"].rsplit("/", 1)[-1]], **prop}
            if "const" in prop:
                prop = {**prop, "enum": [prop["const"]]}
            kind = prop.get("type")
            if kind not in _TYPES:
                raise PermanentError(
                    f"{cls.__name__}.{name.replace('-', '_')}: a workflow parameter is text — "
                    "give it a str, int, float, bool, Literal or Enum type"
                )
            kept = {k: prop[k] for k in (*_KEEP, *_KEEP_STR) if k in prop}
            if "description" in prop:
                kept["description"] = prop["description"]
            out[name] = kept
        return out

    @classmethod
    def defaults(cls) -> dict[str, str]:
        """Argo parameter name → its default, as Argo text."""
        missing = [n for n, f in cls.model_fields.items() if f.is_required()]
        if missing:
            raise PermanentError(
                f"{cls.__name__}: give a default to {', '.join(missing)} "
                "(a workflow starts from its parameters' defaults)"
            )
        try:
            model = cls()
        except ValidationError as e:
            raise PermanentError(
                f"{cls.__name__}: a default is not valid: {field_errors(e, root=cls.__name__)}"
            ) from None
        return {kebab(k): argo_text(v) for k, v in model.model_dump(mode="json").items()}


def argo_text(value: Any) -> str:
    """A value as Argo holds it: text, booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def argo_parameters(params: type[PipelineParams]) -> list[dict[str, Any]]:
    """The workflow parameters of ``params``: name, value (the default), enum, description."""
    schema = params.argo_schema()
    out = []
    for name, value in params.defaults().items():
        prop = schema[name]
        entry: dict[str, Any] = {"name": name, "value": value}
        if "enum" in prop:
            entry["enum"] = [argo_text(v) for v in prop["enum"]]
        entry["description"] = _describe(prop)
        out.append(entry)
    return out


def _describe(prop: Mapping[str, Any]) -> str:
    """What the Argo UI shows under a parameter: the field's description and what it takes
    (nothing more for free text)."""
    text = str(prop.get("description", "")).rstrip(".")
    if "enum" in prop:
        takes = "one of " + ", ".join(argo_text(v) for v in prop["enum"])
    elif prop["type"] == "string":
        return text or "text"
    else:
        takes = {"integer": "a whole number", "number": "a number"}.get(
            prop["type"], "true or false"
        )
    if "minimum" in prop and "maximum" in prop:
        takes += f" from {prop['minimum']} to {prop['maximum']}"
    else:
        words = {
            "minimum": "at least",
            "exclusiveMinimum": "above",
            "maximum": "at most",
            "exclusiveMaximum": "below",
        }
        takes += "".join(f", {w} {prop[k]}" for k, w in words.items() if k in prop)
    return f"{text}: {takes}" if text else takes


def schema_json(params: type[PipelineParams]) -> str:
    """The annotation's value: the schema as compact, stable JSON."""
    return json.dumps(params.argo_schema(), sort_keys=True, separators=(",", ":"))


def schema_of(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The parameters' schema a compiled pipeline carries; empty for an untyped one."""
    raw = ((manifest.get("metadata") or {}).get("annotations") or {}).get(SCHEMA_ANNOTATION)
    if not raw:
        return {}
    try:
        schema = json.loads(raw)
    except ValueError:
        raise PermanentError(f"annotation {SCHEMA_ANNOTATION}: not JSON; recompile") from None
    if not isinstance(schema, dict) or not all(
        isinstance(p, dict) and p.get("type") in _TYPES for p in schema.values()
    ):
        raise PermanentError(f"annotation {SCHEMA_ANNOTATION}: not a parameter schema; recompile")
    return schema


def check_values(manifest: Mapping[str, Any], values: Mapping[str, str]) -> list[tuple[str, str]]:
    """Every ``(parameter, what is wrong)`` among ``values`` by the manifest's schema."""
    schema = schema_of(manifest)
    return [
        (name, problem)
        for name, value in values.items()
        if name in schema and (problem := _problem(schema[name], value)) is not None
    ]


def _problem(prop: Mapping[str, Any], raw: str) -> str | None:
    if raw != raw.strip() and prop["type"] != "string":
        return f"remove the spaces around it: the step gets the text as given (got {raw!r})"
    value = _parse(prop["type"], raw)
    if "enum" in prop and raw not in [argo_text(v) for v in prop["enum"]]:
        value = None  # Argo compares the text: "02" is not "2", "tiny " is not "tiny"
    if value is not None:
        size = len(value) if isinstance(value, str) else value
        limits = (
            value >= prop.get("minimum", value),
            "exclusiveMinimum" not in prop or value > prop["exclusiveMinimum"],
            value <= prop.get("maximum", value),
            "exclusiveMaximum" not in prop or value < prop["exclusiveMaximum"],
            size >= prop.get("minLength", size),
            size <= prop.get("maxLength", size),
        )
        if all(limits):
            if "pattern" in prop and not _matches(prop["pattern"], value):
                return f"must match {prop['pattern']} (got {raw!r})"
            return None
    what = _describe({**prop, "description": ""})
    if prop["type"] == "string" and "enum" not in prop:
        what = f"text of {prop.get('minLength', 0)} to {prop.get('maxLength', 'any')} characters"
    near = closest(raw.strip(), [argo_text(v) for v in prop["enum"]]) if "enum" in prop else None
    hint = f" — did you mean {near}?" if near else ""
    return f"must be {what}{hint} (got {raw!r})"


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        raise PermanentError(f"parameter pattern {pattern!r} is not a regular expression") from None


_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _parse(kind: str, raw: str) -> Any:
    """``raw`` as the JSON type ``kind`` (ASCII digits only, as the steps will read it);
    None when it is not one."""
    if kind == "string":
        return raw
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw.lower())
    if kind == "integer":
        return int(raw) if _INTEGER.fullmatch(raw) else None
    return float(raw) if _NUMBER.fullmatch(raw) else None
