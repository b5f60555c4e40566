"""When each workflow last saved a checkpoint, from its lineage in MLflow: what preemption
would throw away is the GPU time since then
(:func:`gangway.scheduling.preemption.lost_gpu_hours`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from gangway.lineage.ensure import _q
from gangway.lineage.query import pages
from gangway.lineage.records import T

__all__ = ["last_checkpoints"]


def last_checkpoints(client: Any, workflows: Iterable[str]) -> dict[str, datetime]:
    """Workflow name → when its newest checkpoint was recorded, for those that have one."""
    wanted = sorted(set(workflows))
    if not wanted:
        return {}
    exp_ids = [e.experiment_id for e in pages(client.search_experiments)]
    out: dict[str, datetime] = {}
    for i in range(0, len(exp_ids), 100):
        ids = exp_ids[i : i + 100]
        for name in wanted:
            query = f"tags.`{T}.workflow` = '{_q(name)}' and tags.`{T}.kind` = 'step'"
            runs = pages(functools.partial(client.search_runs, ids, query, max_results=1000))
            by_id = {r.info.run_id: name for r in runs}
            if not by_id:
                continue
            models = pages(
                functools.partial(client.search_logged_models, experiment_ids=ids, max_results=1000)
            )
            for m in models:
                if m.source_run_id in by_id and m.model_type == "checkpoint":
                    when = datetime.fromtimestamp(m.creation_timestamp / 1000, UTC)
                    out[name] = max(out.get(name, when), when)
    return out
