"""Reading a YAML document a user wrote (the platform config, a snapshot): UTF-8, one mapping,
no key given twice, every failure one line that names the file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from gangway.errors import PermanentError

__all__ = ["load_yaml", "read_documents", "read_mapping", "yaml_problem"]


_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present


def load_yaml(text: str) -> Any:
    """``text`` read as YAML's safe loader reads it (``yaml.safe_load``), by libyaml's parser
    when PyYAML has it: the same tree, about ten times faster than the pure-Python one — a
    resource manifest is parsed three times each time it is filled, once per lint and run.
    Raises :class:`yaml.YAMLError` as ``safe_load`` does."""
    return yaml.load(text, Loader=_Base)


class _UniqueKeys(_Base):  # type: ignore[misc]
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one
    silently: a second ``research:`` would replace the first)."""


def _twice(keys: list[Any]) -> list[str]:
    """The keys given more than once, sorted (an unhashable key is YAML's own error)."""
    counts = Counter(k for k in keys if isinstance(k, Hashable))
    return sorted(str(k) for k, n in counts.items() if n > 1)


def _mapping(loader: Any, node: yaml.MappingNode) -> dict[object, object]:
    twice = _twice([loader.construct_object(k) for k, _ in node.value])
    if twice:
        line = node.start_mark.line + 1
        raise yaml.constructor.ConstructorError(
            None, None, f"key(s) {', '.join(twice)} given twice in the mapping at line {line}"
        )
    mapping: dict[object, object] = loader.construct_mapping(node)
    return mapping


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    twice = _twice([k for k, _ in pairs])
    if twice:
        raise json.JSONDecodeError(f"key(s) {', '.join(twice)} given twice", "", 0)
    return dict(pairs)


def read_mapping(path: str | Path, *, expected: str) -> dict[str, Any]:
    """The mapping in the YAML file at ``path`` (JSON for a ``.json`` file); ``expected`` says
    what its top-level keys should be, for the error when it is not a mapping."""
    raw = _read(path, many=False)
    if not isinstance(raw, dict):
        raise PermanentError(f"{path}: expected a mapping ({expected})")
    return raw


def read_documents(path: str | Path) -> list[Any]:
    """Every document of the YAML stream at ``path`` (``---`` between them), as read, empty
    ones included (``None``): the caller numbers them as the user sees them."""
    docs: list[Any] = _read(path, many=True)
    return docs


def _read(path: str | Path, *, many: bool) -> Any:
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        if many:
            return list(yaml.load_all(text, Loader=_UniqueKeys))
        if str(path).endswith(".json"):
            return json.loads(text, object_pairs_hook=_unique_pairs)
        return yaml.load(text, Loader=_UniqueKeys)
    except OSError as e:
        raise PermanentError(f"{where}: cannot read it: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise PermanentError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise PermanentError(f"{where}: not valid JSON: {e}") from None
    except yaml.YAMLError as e:
        raise PermanentError(f"{where}: not valid YAML: {yaml_problem(e)}") from None


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong, and where (``line 3, column 7``)."""
    what = getattr(e, "problem", None) or str(e).splitlines()[0]
    mark = getattr(e, "problem_mark", None)
    return f"{what} at line {mark.line + 1}, column {mark.column + 1}" if mark else str(what)
