"""Values printed the way Argo's Go code prints them: ``fmt.Sprintf("%v", v)`` (what a
``{{=...}}`` tag and an output parameter's ``valueFrom.expression`` become) and
``encoding/json`` (expr's ``toJson``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["go_json", "go_text"]


def _digits(f: float) -> tuple[str, int]:
    """The shortest digits that read back as ``f`` (as Go's and Python's shortest formatting
    both find them), and the position of the decimal point after the first digit's."""
    _, digits, exponent = Decimal(repr(abs(f))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    return text, len(digits) + exponent - 1


def _exponent_form(digits: str, exp: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fixed_form(digits: str, exp: int) -> str:
    if exp < 0:
        return "0." + "0" * (-exp - 1) + digits
    whole = digits[: exp + 1].ljust(exp + 1, "0")
    frac = digits[exp + 1 :]
    return whole + ("." + frac if frac else "")


def go_float(f: float) -> str:
    """Go's ``%v`` of a float64 (``%g``, shortest): ``3``, ``2.5``, ``1e+06``, ``1e-05``."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    digits, exp = _digits(f)
    text = _exponent_form(digits, exp) if exp < -4 or exp >= 6 else _fixed_form(digits, exp)
    return ("-" if f < 0 else "") + text


def go_text(value: Any) -> str:
    """``fmt.Sprintf("%v", value)`` for the values an expression yields."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, list):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_text(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def _json_float(f: float) -> str:
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"json: unsupported value: {go_float(f)}")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    digits, exp = _digits(f)
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        text = _exponent_form(digits, exp).replace("e-0", "e-").replace("e+0", "e+")
    else:
        text = _fixed_form(digits, exp)
    return ("-" if f < 0 else "") + text


def _json_string(s: str) -> str:
    text = json.dumps(s, ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def go_json(value: Any) -> str:
    """``json.Marshal(value)``: keys sorted, no spaces, ``<>&`` escaped, Go's numbers."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_json_string(str(k))}:{go_json(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    raise ValueError(f"json: unsupported type {type(value).__name__}")
