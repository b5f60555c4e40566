"""Core Kubernetes kinds (Service, ConfigMap, PersistentVolumeClaim, Pod, Job, Deployment,
StatefulSet ...): their JSON Schemas as the ``kubernetes-validate`` package ships them.

The "strict" schemas are used, so an unknown field is an error, as it is for a CRD
(:mod:`gangway.lint.crds`). ``kubernetes_validate.validate`` stops at the first error and
reads the 1.8 MB of shared definitions on every call; lint reports every error at once, so
the same schema files and the same reference registry are loaded here once per kind and kept.
A schema is used only for the exact group, version and kind it declares
(``x-kubernetes-group-version-kind``): ``batch.volcano.sh/v1 Job`` is not ``batch/v1 Job``.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

__all__ = ["KUBERNETES_VERSION", "core_validator"]

KUBERNETES_VERSION = "1.37.0"
"""The newest Kubernetes version whose schemas ``kubernetes-validate`` 1.37 ships."""

_DIR = f"v{KUBERNETES_VERSION}-local-strict"
_SAFE = re.compile(r"[a-z0-9]+-[a-z0-9-]+\.json")
"""A schema file name (an object's apiVersion and kind must not lead elsewhere)."""


def _schema_dir() -> Any:
    return resources.files("kubernetes_validate") / "kubernetes-json-schema" / _DIR


@functools.cache
def _definitions() -> Any:
    from referencing import Resource

    return Resource.from_contents(json.loads((_schema_dir() / "_definitions.json").read_text()))


def _file_name(api_version: str, kind: str) -> str:
    """The package's naming: ``apps/v1 Deployment`` → ``deployment-apps-v1.json``."""
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{api}.json"


def _declares(schema: dict[str, Any], api_version: str, kind: str) -> bool:
    group, _, version = api_version.rpartition("/")
    return any(
        (g.get("group"), g.get("version"), g.get("kind")) == (group, version, kind)
        for g in schema.get("x-kubernetes-group-version-kind") or []
    )


@functools.cache
def core_validator(api_version: str, kind: str) -> Any:
    """A (cached) jsonschema validator for a core Kubernetes kind, or None when
    :data:`KUBERNETES_VERSION` has no such kind."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    name = _file_name(api_version, kind)
    if not _SAFE.fullmatch(name) or not (path := _schema_dir() / name).is_file():
        return None
    schema = json.loads(path.read_text())
    if not _declares(schema, api_version, kind):
        return None
    registry: Any = Resource.from_contents(schema) @ Registry()
    return Draft202012Validator(schema, registry=_definitions() @ registry)
