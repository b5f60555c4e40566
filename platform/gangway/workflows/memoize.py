"""How a cacheable step compiles (:mod:`gangway.step.caching`): a cache-check template run before
it, and Argo's ``memoize`` on the key the check gives.

For a step ``evaluate`` the DAG gets a task ``evaluate-cache`` (template of the same name,
``python -m gangway.step.cache_key``) with the step's own arguments, and ``evaluate`` gets
two more inputs from it — ``cache-key`` (its ``memoize.key``) and ``cache-record`` (where it
writes its record) — both also in its environment, for
:meth:`~gangway.step.interface.StepSpec.write_outputs`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from hera.workflows import models as m

from gangway.contract import OUT_DIR
from gangway.step.caching import (
    CACHE_CONFIGMAP,
    ENV_CACHE_KEY,
    ENV_CACHE_RECORD,
    Cache,
    fingerprint,
    keyed_flags,
)

__all__ = [
    "CHECK_MODULE",
    "CHECK_OUTPUTS",
    "CHECK_SUFFIX",
    "KEY_INPUT",
    "RECORD_INPUT",
    "check_args",
    "check_name",
    "memoized",
    "step_arguments",
]

CHECK_MODULE = "gangway.step.cache_key"
CHECK_SUFFIX = "-cache"
"""A cacheable step's check task (and template) is the step's name with this after it."""
CHECK_OUTPUTS = ("key", "record", "verdict")
KEY_INPUT = "cache-key"
RECORD_INPUT = "cache-record"


def check_name(step: str) -> str:
    return step + CHECK_SUFFIX


def check_args(
    template: str, module: str, args: Sequence[str], cache: Cache, roles: Mapping[str, str]
) -> list[str]:
    """The check's command line: the step's cache spec, then ``--`` and the step's arguments
    (``roles``: flag → ``read``, ``place`` or ``value``)."""
    spec = {
        "template": template,
        "fingerprint": fingerprint(["python", "-m", module], list(args), roles),
        "module": module,
        "maxAge": cache.max_age,
        "reads": sorted(f for f, r in roles.items() if r == "read"),
        "keyed": keyed_flags(list(args), roles),
    }
    outs = [a for o in CHECK_OUTPUTS for a in (f"--{o}-out", f"{OUT_DIR}/{o}")]
    return [
        "--spec",
        json.dumps(spec, sort_keys=True, separators=(",", ":")),
        "--image",
        "{{workflow.parameters.image}}",
        "--root",
        "{{workflow.parameters.storage-root}}/cache",
        *outs,
        "--",
        *args,
    ]


def step_arguments(step: str) -> dict[str, str]:
    """What the step's task passes for the two inputs its check gives it."""
    outputs = "{{tasks." + check_name(step) + ".outputs.parameters."
    return {KEY_INPUT: outputs + "key}}", RECORD_INPUT: outputs + "record}}"}


def memoized(cache: Cache) -> tuple[m.Memoize, list[m.EnvVar]]:
    """The step's ``memoize`` (on the key its check gave) and the environment that tells it
    where to write its record, under which key."""
    memo = m.Memoize(
        key="{{inputs.parameters." + KEY_INPUT + "}}",
        max_age=cache.max_age,
        cache=m.Cache(config_map=m.LocalObjectReference(name=CACHE_CONFIGMAP)),
    )
    env = [
        m.EnvVar(name=ENV_CACHE_KEY, value="{{inputs.parameters." + KEY_INPUT + "}}"),
        m.EnvVar(name=ENV_CACHE_RECORD, value="{{inputs.parameters." + RECORD_INPUT + "}}"),
    ]
    return memo, env
