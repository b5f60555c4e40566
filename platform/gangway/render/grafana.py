"""Grafana's side of Gangway's dashboards: panels, variables and the dashboard around them,
made with Grafana's typed builders (``grafana-foundation-sdk``, the Grafana 11.6 schema), the
JSON model Grafana reads, and the ConfigMap its sidecar loads it from.

Every query goes to the dashboard's ``datasource`` variable (a Prometheus); a query is its
PromQL and its legend (:data:`Query`). A dashboard is a frame (:func:`frame`) with variables,
then rows and panels in reading order (:func:`laid_out`), which the builder places on Grafana's
24-column grid.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import bargauge, stat, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as board
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

__all__ = [
    "DASHBOARD_LABEL",
    "DATASOURCE",
    "Query",
    "bars",
    "configmap",
    "custom_variable",
    "dashboard_json",
    "datasource_variable",
    "frame",
    "laid_out",
    "query_variable",
    "series",
    "stat_panel",
    "target",
]

DASHBOARD_LABEL = {"grafana_dashboard": "1"}
"""The label the Grafana sidecar loads dashboards by (kube-prometheus-stack's default)."""

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
Query = tuple[str, str]
"""A panel's PromQL expression and its legend."""

# ---- panels ----------------------------------------------------------------------------------


def target(query: Query, ref: str, *, instant: bool) -> prom.Dataquery:
    """One PromQL query of a panel: over the time range, or ``instant`` (the value now)."""
    expr, legend = query
    t = prom.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE).legend_format(legend)
    return t.instant() if instant else t.range()


def _legend() -> common_builders.VizLegendOptions:
    return (
        common_builders.VizLegendOptions()
        .show_legend(True)
        .display_mode(common.LegendDisplayMode.TABLE)
        .placement(common.LegendPlacement.BOTTOM)
        .calcs(["lastNotNull", "max"])
    )


def series(
    title: str, unit: str, about: str, *queries: Query, w: int = 12, stacked: bool = False
) -> timeseries.Panel:
    """A time series panel of ``queries`` (ref ids A, B, …)."""
    p = timeseries.Panel().title(title).description(about).datasource(DATASOURCE).unit(unit)
    p = p.span(w).height(8).line_width(1).fill_opacity(60 if stacked else 10).legend(_legend())
    if stacked:
        p = p.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    for i, q in enumerate(queries):
        p = p.with_target(target(q, chr(ord("A") + i), instant=False))
    return p


def _reduce() -> common_builders.ReduceDataOptions:
    return common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def bars(title: str, unit: str, about: str, query: Query, w: int = 12) -> bargauge.Panel:
    """Horizontal bars, one a series, of ``query`` now (or over the dashboard's range)."""
    p = bargauge.Panel().title(title).description(about).datasource(DATASOURCE).unit(unit)
    p = p.span(w).height(8).orientation(common.VizOrientation.HORIZONTAL)
    p = p.display_mode(common.BarGaugeDisplayMode.BASIC).reduce_options(_reduce())
    return p.with_target(target(query, "A", instant=True))


def stat_panel(title: str, unit: str, about: str, query: Query, w: int = 4) -> stat.Panel:
    """One number a series of ``query``, now."""
    p = stat.Panel().title(title).description(about).datasource(DATASOURCE).unit(unit)
    p = p.span(w).height(4).graph_mode(common.BigValueGraphMode.NONE).reduce_options(_reduce())
    return p.with_target(target(query, "A", instant=True))


# ---- variables -------------------------------------------------------------------------------


def datasource_variable() -> board.DatasourceVariable:
    """``datasource``: which Prometheus every query of the dashboard asks."""
    return board.DatasourceVariable("datasource").label("Prometheus").type("prometheus")


def custom_variable(name: str, values: list[str], *, multi: bool) -> board.CustomVariable:
    """A variable over ``values`` from the config, the first selected (all, for ``multi``)."""
    v = board.CustomVariable(name).values(",".join(values)).multi(multi).include_all(multi)
    first = "$__all" if multi else values[0]
    current = model.VariableOption(text="All" if multi else first, value=first)
    return v.current(current)


def query_variable(name: str, query: str) -> board.QueryVariable:
    """A variable over ``label_values(...)``, refreshed with the time range."""
    return (
        board.QueryVariable(name)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .allow_custom_value(True)
    )


def frame(uid: str, title: str, about: str) -> board.Dashboard:
    """A read-only dashboard tagged ``gangway`` (its links menu lists the others, carrying
    the variables and the time range), refreshed every 30 s, with the ``datasource`` variable."""
    return (
        board.Dashboard(title)
        .uid(uid)
        .description(about)
        .tags(["gangway"])
        .readonly()
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .link(
            board.DashboardLink("Gangway")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(["gangway"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
        .with_variable(datasource_variable())
    )


def _numbered(d: model.Dashboard) -> model.Dashboard:
    """Every panel and row with its own id (Grafana keys its state by them), in layout order."""
    for i, p in enumerate(d.panels or [], start=1):
        p.id_val = i
    return d


def laid_out(d: board.Dashboard, parts: list[Any]) -> model.Dashboard:
    for part in parts:
        d = d.with_row(part) if isinstance(part, board.Row) else d.with_panel(part)
    return _numbered(d.build())


def dashboard_json(dashboard: model.Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (what its API and the sidecar take)."""
    loaded: dict[str, Any] = json.loads(json.dumps(dashboard, cls=JSONEncoder))
    return loaded


def configmap(name: str, namespace: str, dashboard: model.Dashboard) -> dict[str, Any]:
    """A ConfigMap holding ``dashboard`` as ``UID.json``, labelled for the Grafana sidecar."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**DASHBOARD_LABEL, "app.kubernetes.io/part-of": "gangway"},
        },
        "data": {
            f"{dashboard.uid}.json": json.dumps(dashboard_json(dashboard), indent=2, sort_keys=True)
        },
    }
