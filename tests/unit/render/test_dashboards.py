"""The Grafana dashboards `gangway manifests render` ships: JSON that Grafana's own model reads
back unchanged, queries that name only metrics something really emits, and the workflow
dashboard where the Argo UI's "Metrics dashboard" link points."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

from gangway.config import EXAMPLE, load_config
from gangway.render.dashboards import (
    FLEET_UID,
    TEAM_UID,
    WORKFLOW_UID,
    dashboard_configmaps,
    workflow_dashboard_url,
)
from gangway.render.grafana import dashboard_json
from gangway.scheduling.fleet_metrics import FLEET_METRICS
from gangway.step.metrics import METRICS
from gangway.workflows.metrics import ARGO_PREFIX, TEMPLATE_METRICS
from tests.helpers import REPO
from tests.helpers.dashboards import metric_names, queries, rendered, stored

UIDS = [FLEET_UID, TEAM_UID, WORKFLOW_UID]


EMITTED: dict[str, str] = {
    **{n: "gangway step" for m in METRICS for n in stored(m)},
    **{n: "gangway exporter" for m in FLEET_METRICS for n in stored(m)},
    **{n: "argo controller" for m in TEMPLATE_METRICS for n in stored(m, ARGO_PREFIX)},
    # dcgm-exporter's default counters (etc/default-counters.csv): GPU utilisation, 0-100.
    "DCGM_FI_DEV_GPU_UTIL": "dcgm-exporter",
}
"""Every metric a dashboard may name, and what emits it (docs: the dashboards' table)."""


@pytest.fixture(scope="module")
def boards() -> dict[str, dict[str, Any]]:
    return rendered()


@pytest.mark.parametrize("uid", UIDS)
def test_the_json_round_trips_through_the_sdks_dashboard_model(
    boards: dict[str, dict[str, Any]], uid: str
) -> None:
    """Grafana's generated model reads the JSON back into typed panels, queries and options
    and writes the same JSON: nothing in it is outside the schema the SDK was built from."""
    register_default_plugins()  # panel options and Prometheus queries decode to their types
    back = Dashboard.from_json(json.loads(json.dumps(boards[uid])))
    assert dashboard_json(back) == boards[uid]
    kinds = {type(t).__module__ for p in back.panels or [] for t in getattr(p, "targets", []) or []}
    assert kinds == {"grafana_foundation_sdk.models.prometheus"}


def test_the_configmaps_carry_the_same_json_and_the_sidecar_label(
    boards: dict[str, dict[str, Any]],
) -> None:
    cfg = load_config(EXAMPLE)
    for cluster in cfg.clusters:
        maps = dashboard_configmaps(cfg, cluster)
        assert [m["metadata"]["labels"]["grafana_dashboard"] for m in maps] == ["1"] * 3
        for m in maps:
            ((key, text),) = m["data"].items()
            assert json.loads(text) == boards[key.removesuffix(".json")]
        on_disk = yaml.safe_load_all(
            (REPO / f"manifests/overlays/{cluster}/dashboards.yaml").read_text()
        )
        assert [o for o in on_disk if o] == maps


def test_a_cluster_without_prometheus_gets_no_dashboards() -> None:
    cfg = load_config(EXAMPLE)
    name = next(iter(cfg.clusters))
    bare = cfg.clusters[name].model_copy(update={"prometheus_url": None})
    cfg = cfg.model_copy(update={"clusters": {**cfg.clusters, name: bare}})
    assert dashboard_configmaps(cfg, name) == []


@pytest.mark.parametrize("uid", UIDS)
def test_every_query_names_only_metrics_something_emits(
    boards: dict[str, dict[str, Any]], uid: str
) -> None:
    found = queries(boards[uid])
    assert found
    unknown = [(where, n) for where, expr in found for n in metric_names(expr) if n not in EMITTED]
    assert not unknown, unknown
    assert all(metric_names(expr) for _, expr in found)


def test_the_metric_name_reader() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (step, le) (rate(a_bucket{x="y z"}[5m]))) '
        "/ on (step) group_left (pod) max by (step) (b) and c offset 5m"
    )
    assert metric_names(expr) == {"a_bucket", "b", "c"}


def test_the_argo_link_opens_the_workflow_dashboard(boards: dict[str, dict[str, Any]]) -> None:
    """The example config's `dashboard_url` is what `workflow_dashboard_url` gives: the
    workflow dashboard's uid, and variables the dashboard has (the cluster one of its
    options)."""
    cfg = load_config(EXAMPLE)
    variables = {v["name"]: v for v in boards[WORKFLOW_UID]["templating"]["list"]}
    for name, c in cfg.clusters.items():
        assert c.dashboard_url == workflow_dashboard_url("https://grafana.example.com", name)
        url = urlsplit(c.dashboard_url)
        assert url.path == f"/d/{WORKFLOW_UID}"
        args = {k.removeprefix("var-"): v for k, (v,) in parse_qs(url.query).items()}
        assert args == {"cluster": name, "workflow": "${workflow.metadata.name}"}
        assert args.keys() <= variables.keys()
        assert name in variables["cluster"]["query"].split(",")
