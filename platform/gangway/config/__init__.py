"""The platform config: one declarative file for clusters, orgs and teams (queues, quotas,
priorities), storage, MLflow and the allowed image registries.

:func:`load_config` reads the file named by ``GANGWAY_CONFIG``, else the example shipped with
Gangway (``example.yaml`` beside this module), and reports every problem at once with its field
path. The cluster side is rendered from it (``gangway manifests render``); the pipeline's
defaults — image, storage root, MLflow, a team's queue and priority class — come from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gangway.config.checks import problems
from gangway.config.schema import PlatformConfig, TeamView
from gangway.errors import FieldError, FieldErrors, closest, validation_errors
from gangway.user_yaml import read_mapping

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
    from gangway.config import schema as model

    models = [v for v in vars(model).values() if isinstance(v, type) and hasattr(v, "model_fields")]
    return {f for m in models for f in m.model_fields}


def _with_near_key(e: Any) -> list[FieldError]:
    """The schema's errors, a misspelt key's with the known key it most likely meant."""
    out = []
    for err, f in zip(e.errors(), validation_errors(e, root="(the file)"), strict=True):
        near = (
            closest(str(err["loc"][-1]), _known_keys())
            if err["type"] == "extra_forbidden"
            else None
        )
        out.append(replace(f, message=f"{f.message} (did you mean {near!r}?)") if near else f)
    return out


@lru_cache(maxsize=8)
def _load(path: str) -> PlatformConfig:
    where = str(path)
    raw = read_mapping(path, expected="clusters:, orgs:, teams:, …")
    try:
        cfg = PlatformConfig.model_validate(raw)
    except ValidationError as e:
        raise FieldErrors(where, _with_near_key(e)) from None
    found = problems(cfg)
    if found:
        raise FieldErrors(where, found)
    return cfg
