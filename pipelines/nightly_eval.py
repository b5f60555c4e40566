"""Nightly evals: score every model version not yet scored on each suite, compare with the
baseline, fail loudly on a regression.

    gangway run pipelines/nightly_eval.py               # once, here (what the cron runs)
    gangway deploy pipelines/nightly_eval.py            # the template and its CronWorkflow

The suites are data (``pipelines/suites/*.yaml``), compiled in. What is due is found in
MLflow — versions with no finished evaluation for a suite at its current digest — so a missed
night, or a run killed half-way, is caught up by the next one.
"""

from __future__ import annotations

from pathlib import Path

from hera.workflows import DAG
from pydantic import Field

from components.interfaces import DISCOVER, GATE, REPORT, SCORE
from gangway.evals.suites import load_suites, suites_json
from gangway.params import PipelineParams
from gangway.pipeline import pipeline
from gangway.wiring import EACH, SCRATCH, STORAGE_ROOT, Pod, parameters, workflow_output
from gangway.workflows.cron import scheduled

SUITES = suites_json(load_suites([Path(__file__).parent / "suites"]))


class Params(PipelineParams):
    model_name: str = Field(
        "train-eval-infer", min_length=1, description="the registered model whose versions to score"
    )
    limit: int = Field(
        0, ge=0, le=1000, description="at most this many evaluations a suite a night (0: all)"
    )


p = parameters(Params)

with (
    pipeline(
        "nightly-eval",
        team="research",
        title="Nightly evals",
        description=(
            "Scores every model version not yet scored on each eval suite, compares it with "
            "the suite's baseline, and fails naming any version that regressed."
        ),
        parameters=Params,
    ) as w,
    DAG(name="main"),
):
    found = DISCOVER(model=p.model_name, suites=SUITES, limit=p.limit)
    scores = SCORE(
        candidate=EACH.candidate,
        checkpoint=EACH.checkpoint,
        suite=EACH.suite,
        suites=SUITES,
        storage_root=STORAGE_ROOT,
        cache_dir=SCRATCH / "cache",
        pod=Pod(size_for="gpu"),  # a registered version may be of any preset: the largest
        over=found.pending,
    )
    summary = REPORT(model=p.model_name, suites=SUITES, after=scores)
    GATE(regressions=summary.regressions)
    workflow_output("summary", summary.summary)  # on the workflow's page in the Argo UI

cron = scheduled(w, schedules=["0 2 * * *"], timezone="UTC")
