"""Alerts as code: the PrometheusRule rendered per cluster with a Prometheus, valid against
prometheus-operator's CRD; every alert with its runbook; the rules checked and unit-tested by
the real ``promtool`` (tests/data/alerts/promtool_tests.yaml: each alert fires in its scenario
after its ``for:``, and not in the near misses beside it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, PlatformConfig, load_config
from gangway.config.alerts import Alerts, NightlyEval, Thresholds
from gangway.render import render
from gangway.render.alerts import ALERTS, prometheus_rules, rule_groups
from tests.helpers import REPO, gangway
from tests.helpers.servers import prometheus_binary

TESTS = REPO / "tests" / "data" / "alerts" / "promtool_tests.yaml"
RUNBOOKS = REPO / "docs" / "runbooks"


def _tested_config() -> PlatformConfig:
    """The example with the thresholds promtool_tests.yaml is written for."""
    alerts = Alerts(
        queues={"evals": Thresholds(pending="2h")},
        nightly_eval=NightlyEval(clusters=["us-east"]),
    )
    return load_config(EXAMPLE).model_copy(update={"alerts": alerts})


def _alerts(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for g in groups for r in g["rules"]]


def test_rendered_for_each_cluster_with_a_prometheus_with_every_alert() -> None:
    files = render(load_config(EXAMPLE))
    for cluster in ("us-east", "eu-west"):
        kustomization = yaml.safe_load(files[f"overlays/{cluster}/kustomization.yaml"])
        assert "alerts.yaml" in kustomization["resources"]
    (rule,) = yaml.safe_load_all(files["overlays/us-east/alerts.yaml"])
    assert rule["kind"] == "PrometheusRule" and rule["metadata"]["namespace"] == "argo"
    assert {r["alert"] for r in _alerts(rule["spec"]["groups"])} == set(ALERTS)
    # the nightly eval runs on us-east only: elsewhere it would always be missing
    (other,) = yaml.safe_load_all(files["overlays/eu-west/alerts.yaml"])
    assert not {"GangwayNightlyEvalMissing"} & {
        r["alert"] for r in _alerts(other["spec"]["groups"])
    }
    cfg = load_config(EXAMPLE)
    bare = cfg.clusters["us-east"].model_copy(update={"prometheus_url": None})
    without = cfg.model_copy(update={"clusters": {**cfg.clusters, "us-east": bare}})
    assert prometheus_rules(without, "us-east") == []


def test_the_rule_validates_against_the_operators_crd() -> None:
    from gangway.lint import CrdSchemas
    from gangway.lint.structural import validate_structure

    schemas = CrdSchemas.from_env()
    if schemas is None:
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the CRDs (prometheus-operator's)")
    (rule,) = prometheus_rules(_tested_config(), "us-east")
    assert validate_structure(rule, schemas, "PrometheusRule") == []


def test_each_alert_says_what_and_where_with_its_numbers() -> None:
    cfg = load_config(EXAMPLE)
    base = cfg.alerts.runbook_base_url
    assert base is not None and base.startswith("https://")
    for rule in _alerts(rule_groups(cfg, "us-east")):
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, rule["alert"]
        assert "{{ $value" in notes["description"] + notes["summary"], rule["alert"]
        assert notes["runbook_url"] == f"{base}/{rule['alert']}.md"
        assert rule["labels"]["severity"] in {"warning", "critical"}
    # without a published base, no runbook_url at all (a relative path is a dead link)
    for rule in _alerts(rule_groups(_tested_config(), "us-east")):
        assert "runbook_url" not in rule["annotations"], rule["alert"]


@pytest.mark.parametrize("alert", ["GangwayExporterDown", "GangwayLineageFollowerFailing"])
def test_an_alert_whose_value_is_an_age_says_it_as_a_duration(alert: str) -> None:
    (rule,) = [
        r for r in _alerts(rule_groups(load_config(EXAMPLE), "us-east")) if r["alert"] == alert
    ]
    assert "{{ $value | humanizeDuration }}" in rule["annotations"]["description"]
    assert "{{ $value }}" not in rule["annotations"]["description"]


def test_a_queue_threshold_is_its_own_part_of_the_rule() -> None:
    (pending,) = [
        r
        for r in _alerts(rule_groups(_tested_config(), "us-east"))
        if r["alert"] == "GangwayGangPendingTooLong"
    ]
    assert 'queue!~"evals"' in pending["expr"] and "> 1800" in pending["expr"]
    assert 'queue="evals"' in pending["expr"] and "> 7200" in pending["expr"]
    assert "threshold 30m; queue evals: 2h" in pending["annotations"]["description"]


def _commands() -> set[str]:
    help_text = gangway("--help").stdout
    listed = help_text.split("Commands:", 1)[1]
    return set(re.findall(r"^  ([a-z]+) ", listed, re.M))


def test_every_alert_has_a_runbook_naming_real_commands() -> None:
    commands = _commands()
    assert {"why", "queues", "status", "logs"} <= commands
    assert {p.stem for p in RUNBOOKS.glob("*.md")} == set(ALERTS)
    for name in ALERTS:
        text = (RUNBOOKS / f"{name}.md").read_text()
        assert text.startswith(f"# {name}\n"), name
        for part in ("**What it means.**", "## Confirm", "## Mitigate", "## Escalate"):
            assert part in text, (name, part)
        used = set(re.findall(r"`?gangway ([a-z]+)", text))
        assert used, f"{name}: names no gangway command"
        assert used <= commands, (name, used - commands)


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    """The rules of us-east as a Prometheus rule file, beside a copy of the promtool tests
    (annotations left out there: promtool compares them too, and `check rules` checks their
    templates on the whole file)."""
    groups = rule_groups(_tested_config(), "us-east")
    (tmp_path / "full.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    for rule in _alerts(groups):
        rule.pop("annotations")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(TESTS, tmp_path / "tests.yaml")
    return tmp_path


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = prometheus_binary("promtool")
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_promtool_checks_the_rules(rule_dir: Path) -> None:
    found = _promtool("check", "rules", "full.yaml", cwd=rule_dir)
    assert found.returncode == 0, found.stdout + found.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in found.stdout


def test_promtool_fires_each_alert_in_its_scenario_and_not_in_the_near_misses(
    rule_dir: Path,
) -> None:
    tested = {m for m in re.findall(r"alertname: (\w+)", TESTS.read_text())}
    assert tested == set(ALERTS)
    found = _promtool("test", "rules", "tests.yaml", cwd=rule_dir)
    assert found.returncode == 0, found.stdout + found.stderr


def test_the_rules_use_only_declared_metric_names() -> None:
    from gangway.scheduling.fleet_metrics import FLEET_METRICS
    from gangway.step.metrics import METRICS
    from gangway.workflows.metrics import ARGO_PREFIX, TEMPLATE_METRICS

    declared = {m.name for m in (*METRICS, *FLEET_METRICS)}
    declared |= {ARGO_PREFIX + m.name for m in TEMPLATE_METRICS}
    exprs = " ".join(r["expr"] for r in _alerts(rule_groups(_tested_config(), "us-east")))
    used = set(re.findall(r"\b(?:argo_workflows_)?gangway_\w+", exprs))
    assert used and used <= declared, used - declared
