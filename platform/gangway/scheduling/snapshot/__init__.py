"""Snapshots of the clusters: the one input of admission, preemption and placement.

A snapshot comes from a file (:func:`load_snapshot`; ``gangway snapshot save`` writes one), from
recorded Kubernetes API objects (:mod:`gangway.scheduling.snapshot.objects`), or from the live
clusters of the platform config (:mod:`gangway.scheduling.snapshot.live`, the only part that talks
to a cluster).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from gangway.errors import FieldErrors, validation_errors
from gangway.scheduling.snapshot.checks import problems
from gangway.scheduling.snapshot.cluster_state import Snapshot
from gangway.user_yaml import read_mapping

__all__ = ["EXAMPLE_SNAPSHOT", "Snapshot", "dump_snapshot", "load_snapshot", "with_checkpoints"]

EXAMPLE_SNAPSHOT = Path(__file__).with_name("example.yaml")
"""A realistic snapshot of the example config's two clusters, shipped with Gangway."""


def load_snapshot(path: Path) -> Snapshot:
    """The snapshot in ``path`` (YAML or JSON), checked whole: every problem with its field."""
    raw = read_mapping(path, expected="taken_at:, clusters:, teams:, priority_classes:")
    try:
        snap = Snapshot.model_validate(raw)
    except ValidationError as e:
        raise FieldErrors(str(path), validation_errors(e, root="(the file)")) from None
    found = problems(snap)
    if found:
        raise FieldErrors(str(path), found)
    return snap


def dump_snapshot(snap: Snapshot) -> str:
    """``snap`` as YAML, readable back by :func:`load_snapshot`."""
    import yaml

    return yaml.safe_dump(snap.model_dump(mode="json", exclude_defaults=True), sort_keys=False)


def with_checkpoints(snap: Snapshot, marks: Mapping[str, datetime]) -> Snapshot:
    """``snap`` with each gang's last checkpoint time from ``marks`` (workflow name → when it
    last saved one, from lineage) where it has one."""
    clusters = {
        name: c.model_copy(
            update={
                "gangs": [
                    g.model_copy(update={"last_checkpoint_at": marks[g.workflow]})
                    if g.workflow is not None and g.workflow in marks
                    else g
                    for g in c.gangs
                ]
            }
        )
        for name, c in snap.clusters.items()
    }
    return snap.model_copy(update={"clusters": clusters})
