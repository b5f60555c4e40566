"""Reading a YAML document a user wrote (the platform config, a snapshot): UTF-8, one mapping,
no key given twice, every failure one line that names the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gangway.errors import PermanentError

__all__ = ["read_mapping"]


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one
    silently: a second ``research:`` would replace the first)."""


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    keys = [loader.construct_object(k) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    if twice:
        line = node.start_mark.line + 1
        raise yaml.constructor.ConstructorError(
            None, None, f"key(s) {', '.join(twice)} given twice in the mapping at line {line}"
        )
    return loader.construct_mapping(node)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_mapping(path: str | Path, *, expected: str) -> dict[str, Any]:
    """The mapping in the YAML (or JSON) file at ``path``; ``expected`` says what its top-level
    keys should be, for the error when it is not a mapping."""
    where = str(path)
    try:
        raw = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_UniqueKeys)
    except OSError as e:
        raise PermanentError(f"{where}: cannot read it: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise PermanentError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except yaml.YAMLError as e:
        raise PermanentError(f"{where}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise PermanentError(f"{where}: expected a mapping ({expected})")
    return raw
