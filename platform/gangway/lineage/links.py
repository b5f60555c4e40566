"""Links in the Argo UI from a workflow to its MLflow parent run (and to its metrics dashboard).

The Argo server shows the controller config's ``links`` on every workflow page, substituting
``${...}`` placeholders from the workflow object: ``${metadata.uid}`` and, since Argo 3.6,
``${workflow.metadata.annotations.KEY}`` even for keys with dots and slashes. The parent run's
id is not known when the workflow is created (its first step creates it), so the link opens the
pipeline's experiment filtered to the runs tagged with the workflow's uid — the parent run
and its steps. The experiment id comes from an annotation ``gangway submit`` / ``gangway
deploy`` set (see :func:`annotate_experiment`). A cluster whose ``dashboard_url`` is set gets
a third link, "Metrics dashboard": that URL with Argo's link variables filled in
(``${workflow.metadata.name}``), the workflow's dashboard (:func:`dashboard_link`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import yaml

from gangway.contract import EXPERIMENT_ANNOTATION, tag

__all__ = [
    "EXPERIMENT_ANNOTATION",
    "annotate_experiment",
    "configmap_yaml",
    "controller_configmap",
    "controller_links",
    "dashboard_link",
    "experiment_id",
    "record_filter",
    "record_link",
    "workflow_runs_url",
]


_BY_UID = f"tags.`{tag('workflow_uid')}` = '"
"""An MLflow search filter selecting a workflow's runs, up to the uid and closing quote."""


def workflow_runs_url(mlflow_ui: str, experiment_id: str, workflow_uid: str) -> str:
    """The MLflow UI page listing a workflow's parent run and step runs."""
    base = mlflow_ui.rstrip("/")
    query = quote(f"{_BY_UID}{workflow_uid}'", safe="")
    return f"{base}/#/experiments/{experiment_id}/runs?searchFilter={query}"


def dashboard_link(dashboard_url: str) -> dict[str, str]:
    """The workflow-scoped link "Metrics dashboard" to ``dashboard_url``, a URL Argo fills in
    (``${workflow.metadata.name}`` and any other of its link variables)."""
    return {"name": "Metrics dashboard", "scope": "workflow", "url": dashboard_url}


def controller_links(mlflow_ui: str, dashboard_url: str | None = None) -> list[dict[str, str]]:
    """The workflow-scoped ``links`` for the Argo workflow-controller ConfigMap: the MLflow run
    and experiment and, when ``dashboard_url`` is given, the metrics dashboard."""
    base = mlflow_ui.rstrip("/")
    experiment = "${workflow.metadata.annotations." + EXPERIMENT_ANNOTATION + "}"
    run_filter = quote(_BY_UID, safe="") + "${metadata.uid}" + quote("'", safe="")
    links = [
        {
            "name": "MLflow run",
            "scope": "workflow",
            "url": f"{base}/#/experiments/{experiment}/runs?searchFilter={run_filter}",
        },
        {
            "name": "MLflow experiment",
            "scope": "workflow",
            "url": f"{base}/#/experiments/{experiment}",
        },
    ]
    return [*links, dashboard_link(dashboard_url)] if dashboard_url else links


def controller_configmap(mlflow_ui: str, namespace: str = "argo") -> dict[str, Any]:
    """``workflow-controller-configmap`` carrying Gangway's links (merge it into yours)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "workflow-controller-configmap", "namespace": namespace},
        "data": {"links": yaml.safe_dump(controller_links(mlflow_ui), sort_keys=False)},
    }


def configmap_yaml(mlflow_ui: str, namespace: str = "argo") -> str:
    """:func:`controller_configmap` as YAML, its ``links`` as a readable block."""

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    return yaml.dump(
        controller_configmap(mlflow_ui, namespace), Dumper=_Dumper, sort_keys=False, width=1000
    )


def annotate_experiment(obj: Mapping[str, Any], experiment_id: str) -> dict[str, Any]:
    """``obj`` with the experiment annotation on every Workflow it is or will create."""
    out = copy.deepcopy(dict(obj))
    kind = out.get("kind")
    if kind == "Workflow":
        meta = out.setdefault("metadata", {})
    elif kind in ("WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow"):
        meta = out.setdefault("spec", {}).setdefault("workflowMetadata", {})
    else:
        return out
    meta.setdefault("annotations", {})[EXPERIMENT_ANNOTATION] = experiment_id
    return out


def experiment_id(mlflow_url: str, pipeline: str, *, create: bool) -> str | None:
    """The id of the pipeline's MLflow experiment (thin I/O); created when asked and missing."""
    from gangway.lineage import store
    from gangway.lineage.ensure import ensure_experiment

    # A link is a nicety: an unreachable server must not hold a submit for minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    client = store.client(mlflow_url, write=create)
    if create:
        return ensure_experiment(client, pipeline)
    exp = client.get_experiment_by_name(pipeline)
    return None if exp is None else str(exp.experiment_id)


def record_filter(key: str) -> str:
    """The MLflow search filter selecting the run of one step attempt (its record key)."""
    return f"tags.`{tag('record')}` = '{key}'"


def record_link(tracking_uri: str, pipeline: str, key: str, timeout: float = 3.0) -> str:
    """A link to a step attempt's MLflow run that works before the run exists: the pipeline's
    experiment searched by the attempt's record key (the replay tags the run with it).

    For an http(s) tracking server the experiment's id is read (or the experiment created)
    through MLflow's REST API — a few milliseconds, no MLflow client import; a server that does
    not answer gives "" (the record stays spooled; the link is a nicety). For a local store the
    link is the search filter itself, for the MLflow UI's search box.
    """
    if not tracking_uri.startswith(("http://", "https://")):
        return record_filter(key)
    try:
        exp = _experiment_by_rest(tracking_uri.rstrip("/"), pipeline, timeout)
    except Exception:  # down, not MLflow, a malformed URI: the link is a nicety, never fatal
        return ""
    query = quote(record_filter(key), safe="")
    return f"{tracking_uri.rstrip('/')}/#/experiments/{exp}/runs?searchFilter={query}"


def _experiment_by_rest(base: str, name: str, timeout: float) -> str:
    import json
    import urllib.error
    import urllib.request

    api = f"{base}/api/2.0/mlflow/experiments"

    def get() -> str:
        url = f"{api}/get-by-name?experiment_name={quote(name, safe='')}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return str(json.load(r)["experiment"]["experiment_id"])

    try:
        return get()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
    body = json.dumps({"name": name}).encode()
    req = urllib.request.Request(
        f"{api}/create", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return str(json.load(r)["experiment_id"])
    except urllib.error.HTTPError as e:  # created meanwhile by another step
        if e.code != 400:
            raise
        return get()
