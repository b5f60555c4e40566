"""Nightly evals, the pure parts: suites as data, what is due, the comparison, the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gangway.errors import PermanentError
from gangway.evals.compare import compare, judge
from gangway.evals.discover import Candidate, pending
from gangway.evals.report import markdown, regressions
from gangway.evals.suites import EvalSuite, Metric, load_suites, parse_suites, suites_json
from gangway.params import PipelineParams
from tests.helpers import REPO

SUITES = REPO / "pipelines" / "suites"
DIGEST = "sha256:" + "ab" * 32


def _suite(name: str = "ppl", **over: object) -> EvalSuite:
    raw: dict[str, object] = {
        "name": name,
        "dataset": {"uri": "corpora/x", "digest": DIGEST},
        "scorer": "perplexity",
        "metrics": [{"name": "val_perplexity", "better": "lower", "tolerance": 0.05}],
        "baseline": {"alias": "production"},
        **over,
    }
    return EvalSuite.model_validate(raw)


def test_the_shipped_suites_load_and_round_trip() -> None:
    suites = load_suites([SUITES])
    assert [s.name for s in suites] == ["heldout-perplexity", "next-bytes"]
    assert parse_suites(suites_json(suites)) == suites
    assert len({s.digest for s in suites}) == 2


def test_a_suites_digest_follows_its_data_and_settings_not_its_baseline() -> None:
    base = _suite()
    assert _suite(settings={"max_tokens": 10}).digest != base.digest
    assert (
        _suite(dataset={"uri": "corpora/x", "digest": "sha256:" + "cd" * 32}).digest != base.digest
    )
    assert _suite(baseline={"version": 3}).digest == base.digest
    assert _suite(description="words").digest == base.digest


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: Bad Name\n", "name: String should match pattern"),
        (
            "name: s\ndataset: {uri: x, digest: md5:1}\nscorer: perplexity\n"
            "metrics: [{name: val_loss, better: lower, tolerance: 0.1}]\nbaseline: {alias: p}\n",
            "dataset.digest",
        ),
        (
            f"name: s\ndataset: {{uri: x, digest: '{DIGEST}'}}\nscorer: perplexity\n"
            "metrics: [{name: exact_match, better: higher, tolerance: 0.1}]\n"
            "baseline: {alias: p}\n",
            "metric 'exact_match': the perplexity scorer reports val_loss, val_perplexity",
        ),
        (
            f"name: s\ndataset: {{uri: x, digest: '{DIGEST}'}}\nscorer: perplexity\n"
            "metrics: [{name: val_loss, better: lower, tolerance: 0.1}]\n"
            "baseline: {alias: p, version: 2}\n",
            "baseline: Value error, give exactly one of alias or version",
        ),
        ("name: [unclosed\n", "not YAML"),
    ],
    ids=["bad-name", "bad-digest", "unknown-metric", "two-baselines", "not-yaml"],
)
def test_a_bad_suite_names_its_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(PermanentError, match=r"s\.yaml") as e:
        load_suites([tmp_path])
    assert message in str(e.value)


def test_two_suites_of_one_name_are_refused(tmp_path: Path) -> None:
    for f in ("a.yaml", "b.yaml"):
        (tmp_path / f).write_text((SUITES / "next-bytes.yaml").read_text())
    with pytest.raises(PermanentError, match="next-bytes defined more than once"):
        load_suites([tmp_path])


def _c(version: int, *aliases: str, checkpoint: str = "file:///c") -> Candidate:
    return Candidate("m", version, f"{checkpoint}/{version}" if checkpoint else "", aliases)


def test_what_is_due_is_what_has_no_finished_evaluation_at_the_suites_digest() -> None:
    a, b = _suite("a"), _suite("b")
    cands = [_c(1, "production"), _c(2), _c(3)]
    done = {("a", a.digest, "m/1"), ("a", a.digest, "m/2"), ("b", "sha256:old", "m/1")}
    due = [(p.suite, p.candidate) for p in pending(cands, [a, b], done)]
    # b's evaluation of m/1 was at an older digest: due again; the baseline comes first
    assert due == [("a", "m/3"), ("b", "m/1"), ("b", "m/3"), ("b", "m/2")]


def test_a_limit_keeps_the_baseline_and_the_newest_and_no_checkpoint_is_no_candidate() -> None:
    cands = [_c(1), _c(2, "production"), _c(3), _c(4, checkpoint="")]
    due = [p.candidate for p in pending(cands, [_suite()], set(), limit=2)]
    assert due == ["m/2", "m/3"]  # m/4 has no checkpoint; m/1 waits for the next night


@pytest.mark.parametrize(
    ("better", "value", "verdict"),
    [
        ("lower", 10.4, "ok"),
        ("lower", 10.6, "regression"),
        ("lower", 9.4, "improved"),
        ("higher", 9.4, "regression"),
        ("higher", 10.6, "improved"),
    ],
)
def test_judge_by_direction_and_tolerance(better: str, value: float, verdict: str) -> None:
    metric = Metric.model_validate({"name": "m", "better": better, "tolerance": 0.05})
    delta, got = judge(metric, value, 10.0)
    assert got == verdict and delta == pytest.approx((value - 10) / 10)


def test_compare_and_summarize_a_night() -> None:
    suite = _suite("ppl")
    scores = {("ppl", "m/1"): {"val_perplexity": 10.0}, ("ppl", "m/3"): {"val_perplexity": 12.0}}
    rows = compare([suite], {"ppl": ["m/1", "m/3", "m/4"]}, {"ppl": "m/1"}, scores)
    assert [(r.candidate, r.verdict) for r in rows] == [
        ("m/1", "ok"),  # the baseline itself
        ("m/3", "regression"),
        ("m/4", "not scored"),
    ]
    assert regressions(rows) == {"m/3": ["ppl"]}
    text = markdown("Night", rows, ["ppl"], due=3)
    assert "**REGRESSION: m/3** on ppl" in text
    assert "| m/3 | val_perplexity | 12 | 10 | +20.0% | **regression** |" in text
    no_base = compare([suite], {"ppl": ["m/3"]}, {"ppl": None}, scores)
    assert [r.verdict for r in no_base] == ["no baseline"]
    assert "Nothing new to score on 1 suite(s): ppl." in markdown("Night", [], ["ppl"], due=0)


def test_the_nightly_pipeline_compiles_to_its_template_and_a_cron_workflow_that_runs_it() -> None:
    from gangway.workflows.compiler import compile_documents

    template, cron = compile_documents(REPO / "pipelines" / "nightly_eval.py")
    assert (template["kind"], cron["kind"]) == ("WorkflowTemplate", "CronWorkflow")
    spec = cron["spec"]
    assert spec["schedules"] == ["0 2 * * *"] and "schedule" not in spec  # the plural field
    assert spec["timezone"] == "UTC" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    assert spec["successfulJobsHistoryLimit"] and spec["failedJobsHistoryLimit"]
    assert spec["workflowSpec"]["workflowTemplateRef"] == {"name": template["metadata"]["name"]}
    tasks = {t["name"]: t for t in template["spec"]["templates"] if "dag" in t}["main"]["dag"]
    assert [t["name"] for t in tasks["tasks"]] == ["discover", "score", "report", "gate"]
    main = {t["name"]: t for t in template["spec"]["templates"]}["main"]
    assert main["outputs"]["parameters"] == [  # the workflow's own output: its entrypoint's
        {
            "name": "summary",
            "valueFrom": {"parameter": "{{tasks.report.outputs.parameters.summary}}"},
        }
    ]


def test_a_workflow_output_must_be_a_tasks_output() -> None:
    from hera.workflows import DAG

    from gangway.pipeline import pipeline
    from gangway.wiring import parameters, workflow_output

    class P(PipelineParams):
        x: int = 1

    with (
        pytest.raises(PermanentError, match=r"workflow_output\('s', …\): give a task's output"),
        pipeline("w", team="research", title="t", description="d", parameters=P),
        DAG(name="main"),
    ):
        workflow_output("s", parameters(P).x)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedules": ["every night"]}, "cron lines of five fields"),
        ({"schedules": []}, "cron lines of five fields"),
        ({"timezone": "Mars/Olympus"}, "IANA time zone"),
    ],
)
def test_a_bad_schedule_is_refused_at_compile_time(kwargs: dict[str, Any], message: str) -> None:
    from hera.workflows import WorkflowTemplate

    from gangway.workflows.cron import scheduled

    args: dict[str, Any] = {"schedules": ["0 2 * * *"], "timezone": "UTC", **kwargs}
    with pytest.raises(PermanentError, match=message):
        scheduled(WorkflowTemplate(name="x"), **args)


def test_a_lone_cron_workflow_runs_its_workflow_once_and_a_referring_one_says_where() -> None:
    from gangway.local import workflow_from_template

    inline = {
        "kind": "CronWorkflow",
        "metadata": {"name": "c"},
        "spec": {"schedules": ["* * * * *"], "workflowSpec": {"entrypoint": "main"}},
    }
    wf = workflow_from_template(inline)
    assert wf["kind"] == "Workflow" and wf["spec"]["entrypoint"] == "main"
    inline["spec"] = {"workflowSpec": {"workflowTemplateRef": {"name": "t"}}}
    with pytest.raises(PermanentError, match="runs the WorkflowTemplate 't': run the pipeline"):
        workflow_from_template(inline)
