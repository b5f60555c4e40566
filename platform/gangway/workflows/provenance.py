"""Where a run came from: the pipeline's git revision, the cluster it runs on, the image.

Pipelines declare ``cluster`` and ``git-sha`` parameters (see :func:`gangway.pipeline.pipeline`)
left empty in the compiled template, so golden YAML does not change with every commit;
``gangway run`` and ``gangway submit`` fill them in, and steps record them on the MLflow
parent run. ``gangway submit`` also pins the ``image`` parameter by digest
(:func:`pinned_image_param`), so the parent run records the image that ran, not a tag that
may move; ``gangway run`` runs on this machine, with no registry, and leaves it as it is.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from gangway.argo.references import declared_parameters
from gangway.config import PlatformConfig

__all__ = [
    "IMAGE_PARAM",
    "git_revision",
    "pinned_image_param",
    "provenance_params",
    "submit_provenance",
]

IMAGE_PARAM = "image"
"""The workflow parameter naming the runtime image (steps get it as ``GANGWAY_IMAGE``)."""


def git_revision(path: Path) -> str:
    """``HEAD`` of the git checkout holding ``path`` (``-dirty`` if it has local changes);
    empty outside a checkout or without git."""
    where = path if path.is_dir() else path.parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        sha = git("rev-parse", "HEAD")
        if not sha:
            return ""
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", str(path))
        return f"{sha}-dirty" if dirty else sha
    except (OSError, subprocess.TimeoutExpired):
        return ""


def provenance_params(
    pipeline: Path, declared: Collection[str], given: Mapping[str, str], *, cluster: str
) -> dict[str, str]:
    """Values for the declared provenance parameters the user did not give."""
    out: dict[str, str] = {}
    if "cluster" in declared and not given.get("cluster"):
        out["cluster"] = cluster
    if "git-sha" in declared and not given.get("git-sha"):
        out["git-sha"] = git_revision(pipeline.resolve())
    return out


def submit_provenance(
    pipeline: Path,
    manifest: Mapping[str, Any],
    given: Mapping[str, str],
    *,
    cluster: str,
    config: PlatformConfig,
) -> dict[str, str]:
    """What ``gangway submit`` fills in: ``git-sha`` and ``cluster`` for a pipeline file (a
    compiled YAML carries its own git-sha; its cluster is known only now), and the artifact
    bucket of the cluster's region as ``storage-root`` unless given. ``cluster`` is ``env``
    when the Argo server comes from the environment, not the config."""
    declared = declared_parameters(manifest)
    if pipeline.suffix == ".py":
        out = provenance_params(pipeline, declared, given, cluster=cluster)
    else:
        named = cluster != "env" and "cluster" in declared and "cluster" not in given
        out = {"cluster": cluster} if named else {}
    if cluster in config.clusters and "storage-root" in declared and "storage-root" not in given:
        out["storage-root"] = config.storage.buckets[config.clusters[cluster].region]
    return out


def pinned_image_param(
    template: Mapping[str, Any], given: Mapping[str, str], *, pin: Callable[[str], str]
) -> dict[str, str]:
    """``image`` pinned by digest with ``pin`` (:func:`gangway.cluster.images.pin_image`): the value
    given, else the template's default; nothing when the template declares no ``image`` or
    its value is empty or an Argo placeholder."""
    spec = template.get("spec") or {}
    params = (spec.get("arguments") or {}).get("parameters") or []
    defaults = {p.get("name"): str(p.get("value", "")) for p in params}
    if IMAGE_PARAM not in defaults:
        return {}
    ref = given.get(IMAGE_PARAM) or defaults[IMAGE_PARAM]
    if not ref or "{{" in ref:
        return {}
    return {IMAGE_PARAM: pin(ref)}
