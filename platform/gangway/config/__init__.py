"""The platform config: one declarative file for clusters, orgs and teams (queues, quotas,
priorities), storage, MLflow and the allowed image registries.

:func:`load_config` reads the file named by ``GANGWAY_CONFIG``, else the example shipped with
Gangway (``example.yaml`` beside this module), and reports every problem at once with its field
path. The cluster side is rendered from it (``gangway manifests render``); the pipeline's
defaults — image, storage root, MLflow, a team's queue and priority class — come from it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gangway.config.checks import problems
from gangway.config.model import PlatformConfig, TeamView
from gangway.errors import PermanentError

__all__ = ["CONFIG_ENV", "EXAMPLE", "PlatformConfig", "TeamView", "config_path", "load_config"]

CONFIG_ENV = "GANGWAY_CONFIG"
EXAMPLE = Path(__file__).with_name("example.yaml")


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file in use: ``GANGWAY_CONFIG``, else the shipped example."""
    env = os.environ if env is None else env
    return Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else EXAMPLE


def load_config(path: Path | None = None) -> PlatformConfig:
    """The platform config at ``path`` (default: :func:`config_path`), checked whole."""
    return _load(str(path or config_path()))


def _known_keys() -> set[str]:
    from gangway.config import model

    models = [v for v in vars(model).values() if isinstance(v, type) and hasattr(v, "model_fields")]
    return {f for m in models for f in m.model_fields}


def _line(err: Any) -> str:
    """One pydantic error as ``field.path: message``, with a near key for a misspelt one."""
    path = ".".join(str(x) for x in err["loc"]) or "(the file)"
    line = f"{path}: {err['msg']}"
    if err["type"] == "extra_forbidden" and err["loc"]:
        close = difflib.get_close_matches(str(err["loc"][-1]), sorted(_known_keys()), n=1)
        line += f" (did you mean {close[0]!r}?)" if close else ""
    return line


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


@lru_cache(maxsize=8)
def _load(path: str) -> PlatformConfig:
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
        raise PermanentError(f"{where}: expected a mapping (clusters:, orgs:, teams:, …)")
    try:
        cfg = PlatformConfig.model_validate(raw)
    except ValidationError as e:
        lines = [_line(err) for err in e.errors()]
        raise PermanentError(
            f"{where}: {len(lines)} problem(s):\n  " + "\n  ".join(lines)
        ) from None
    found = problems(cfg)
    if found:
        raise PermanentError(f"{where}: {len(found)} problem(s):\n  " + "\n  ".join(found))
    return cfg
