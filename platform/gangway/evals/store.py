"""What nightly evals read from and write to MLflow — a thin layer; the decisions are in
:mod:`.discover` and :mod:`.compare`.

An evaluation is a run in the eval pipeline's experiment, a child of the workflow's parent
run, tagged ``gangway.kind=eval`` with the suite, the suite's digest and the candidate
(``gangway.eval_suite``, ``.eval_suite_digest``, ``.model_version``), the checkpoint it
scored (``.checkpoint_uri``) and the suite's dataset as a dataset input. It is found by those
tags before it is made, so a rerun of the same night makes no second one, and one left
RUNNING by a killed workflow is finished by the next night.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangway.contract import tag
from gangway.evals.discover import Candidate, Pair, ScoredKey
from gangway.evals.suites import Baseline, EvalSuite
from gangway.lineage.ensure import _q, ensure_one, ensure_parent
from gangway.lineage.records import DatasetRef, WorkflowInfo

__all__ = [
    "REGRESSION_TAG",
    "EvalRun",
    "Evaluation",
    "baseline_of",
    "candidates",
    "ensure_eval",
    "evaluations",
    "finish_eval",
    "log_report",
    "tag_regressions",
]

REGRESSION_TAG = "regression"
"""On a model version that regressed: the suites it regressed on (comma-separated)."""


def candidates(client: Any, model: str) -> list[Candidate]:
    """Every version of registered model ``model`` (none when it is not registered)."""
    found = client.search_model_versions(f"name = '{_q(model)}'")
    return [
        Candidate(
            model=str(v.name),
            version=int(v.version),
            checkpoint=str((v.tags or {}).get(tag("checkpoint"), "")),
            aliases=tuple(getattr(v, "aliases", None) or ()),
        )
        for v in found
    ]


def baseline_of(client: Any, model: str, baseline: Baseline) -> str | None:
    """The ``NAME/VERSION`` a suite compares with, or None when its alias is not set."""
    if baseline.version is not None:
        return f"{model}/{baseline.version}"
    try:
        v = client.get_model_version_by_alias(model, baseline.alias)
    except Exception:  # no such alias (or model) yet: nothing to compare with
        return None
    return f"{v.name}/{v.version}"


_EVAL_QUERY = f"tags.`{tag('kind')}` = 'eval'"


@dataclass(frozen=True)
class Evaluation:
    """A finished evaluation: which suite at which digest, which version, by which workflow."""

    suite: str
    digest: str
    candidate: str
    workflow_uid: str
    metrics: dict[str, float]

    @property
    def key(self) -> ScoredKey:
        return (self.suite, self.digest, self.candidate)


def evaluations(client: Any, exp_id: str) -> list[Evaluation]:
    """Every finished evaluation in ``exp_id``."""
    out: list[Evaluation] = []
    token = None
    while True:
        page = client.search_runs([exp_id], _EVAL_QUERY, max_results=1000, page_token=token)
        for r in page:
            t = r.data.tags
            if r.info.status == "FINISHED":
                out.append(
                    Evaluation(
                        suite=t.get(tag("eval_suite"), ""),
                        digest=t.get(tag("eval_suite_digest"), ""),
                        candidate=t.get(tag("model_version"), ""),
                        workflow_uid=t.get(tag("workflow_uid"), ""),
                        metrics=dict(r.data.metrics),
                    )
                )
        token = page.token
        if not token:
            return out


@dataclass(frozen=True)
class EvalRun:
    run_id: str
    finished: bool
    metrics: dict[str, float]


def _query(suite: EvalSuite, pair: Pair) -> str:
    return (
        f"{_EVAL_QUERY} and tags.`{tag('eval_suite')}` = '{_q(suite.name)}'"
        f" and tags.`{tag('eval_suite_digest')}` = '{suite.digest}'"
        f" and tags.`{tag('model_version')}` = '{_q(pair.candidate)}'"
    )


def ensure_eval(
    client: Any, exp_id: str, wf: WorkflowInfo, suite: EvalSuite, pair: Pair, dataset: str
) -> EvalRun:
    """The one evaluation run of ``pair`` on ``suite`` at its digest: found, or made under
    the workflow's parent run. ``finished``: it was scored before (nothing to do)."""

    def find() -> list[str]:
        return sorted(str(r.info.run_id) for r in client.search_runs([exp_id], _query(suite, pair)))

    def create() -> None:
        parent = ensure_parent(client, exp_id, wf)
        tags = {
            "mlflow.parentRunId": parent,
            "mlflow.runName": f"{suite.name} · {pair.candidate}",
            tag("kind"): "eval",
            tag("eval_suite"): suite.name,
            tag("eval_suite_digest"): suite.digest,
            tag("model_version"): pair.candidate,
            tag("checkpoint_uri"): pair.checkpoint,
            tag("workflow_uid"): wf.uid,
            tag("workflow"): wf.name,
        }
        client.create_run(exp_id, tags=tags)

    run_id = ensure_one(find, create, lambda other, _: client.delete_run(other))
    run = client.get_run(run_id)
    done = run.info.status == "FINISHED"
    if not done:
        from gangway.lineage.replay import dataset_input

        ref = DatasetRef(name=f"eval-{suite.name}", digest=suite.dataset.digest, source=dataset)
        client.log_inputs(run_id, datasets=[dataset_input(ref)])
    return EvalRun(run_id, done, dict(run.data.metrics))


def finish_eval(
    client: Any,
    run_id: str,
    wf: WorkflowInfo,
    metrics: Mapping[str, float],
    params: Mapping[str, Any],
) -> None:
    """Log the scores and close the run, as the workflow that finished it (a run left by a
    killed workflow is completed by the next night's, and counts as that night's)."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    exp_id = client.get_run(run_id).info.experiment_id
    tags = {
        "mlflow.parentRunId": ensure_parent(client, exp_id, wf),
        tag("workflow_uid"): wf.uid,
        tag("workflow"): wf.name,
    }
    client.log_batch(
        run_id,
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
        params=[Param(k, v if isinstance(v, str) else json.dumps(v)) for k, v in params.items()],
        tags=[RunTag(k, v) for k, v in tags.items()],
    )
    client.set_terminated(run_id, status="FINISHED")


def tag_regressions(client: Any, regressed: Mapping[str, list[str]]) -> None:
    """Tag each regressed version with the suites it regressed on (idempotent)."""
    for ref, suites in regressed.items():
        name, _, version = ref.rpartition("/")
        client.set_model_version_tag(name, version, REGRESSION_TAG, ",".join(suites))


def log_report(client: Any, exp_id: str, wf: WorkflowInfo, text: str) -> str:
    """The summary as ``nightly-eval/summary.md`` on the workflow's parent run (its id)."""
    parent = ensure_parent(client, exp_id, wf)
    client.log_text(parent, text, "nightly-eval/summary.md")
    return str(parent)
