"""Where a run came from: the pipeline's git revision and the cluster it runs on.

Pipelines declare ``cluster`` and ``git-sha`` parameters (see :func:`gangway.pipeline.pipeline`)
left empty in the compiled template, so golden YAML does not change with every commit;
``gangway run`` and ``gangway submit`` fill them in, and steps record them on the MLflow
parent run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path

__all__ = ["git_revision", "provenance_params"]


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
