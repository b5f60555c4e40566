"""Hera's runner (``python -m hera.workflows.runner``), run by a local step with the pod's
paths mapped.

Hera's runner reads and writes the paths its annotations name (``/tmp/hera-inputs/artifacts/x``,
an ``Artifact(path=...)``) at run time, so rewriting the template's text
(:mod:`gangway.local._paths`) cannot reach them. A local step therefore runs this module
instead: it points the runner's path lookups at the attempt's directories
(``GANGWAY_POD_MOUNTS``: a JSON list of ``[container prefix, host directory]``, longest first),
then runs Hera's runner unchanged.
"""

from __future__ import annotations

import json
import os
import pathlib
import runpy
from typing import Any

__all__ = ["MOUNTS_ENV", "host_path"]

MOUNTS_ENV = "GANGWAY_POD_MOUNTS"


def host_path(path: str, mounts: list[list[str]]) -> str:
    """Where the container path ``path`` is on this machine."""
    for prefix, host in mounts:
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            return host + path[len(prefix) :]
    return path


def _patch(mounts: list[list[str]]) -> None:
    from hera.workflows._runner import script_annotations_util as util

    def mapped(*parts: Any) -> pathlib.Path:
        return pathlib.Path(host_path(str(pathlib.PurePosixPath(*parts)), mounts))

    util.Path = mapped  # type: ignore[attr-defined,assignment]
    original = util.get_annotated_artifact_value

    def value(param_name: str, annotation: Any) -> Any:
        got = original(param_name, annotation)
        return host_path(got, mounts) if isinstance(got, str) and got == annotation.path else got

    import hera.workflows._runner.util as runner_util

    for module in (util, runner_util):  # the runner imported the function by name
        if hasattr(module, "get_annotated_artifact_value"):
            setattr(module, "get_annotated_artifact_value", value)  # noqa: B010


if __name__ == "__main__":
    _patch(json.loads(os.environ.get(MOUNTS_ENV, "[]")))
    runpy.run_module("hera.workflows.runner", run_name="__main__", alter_sys=True)
