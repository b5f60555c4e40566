"""`gangway manifests render`: the cluster side from the platform config — deterministic,
valid against the upstream CRDs and the Kubernetes schemas, buildable with kustomize, least
privilege, and consistent with what the compiled pipelines reference."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, load_config
from gangway.render import differences, render
from gangway.render.kube import RBAC_RULES
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO, gangway

KUBERNETES_VERSION = "1.32.0"
"""The Kubernetes schemas core objects are checked against (ValidatingAdmissionPolicy is GA
since 1.30)."""


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return render(load_config(EXAMPLE))


def _objects(files: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (path, obj)
        for path, text in files.items()
        if not path.endswith("kustomization.yaml")
        for obj in yaml.safe_load_all(text)
        if obj
    ]


def test_rendering_is_deterministic_and_matches_the_committed_manifests(
    files: dict[str, str],
) -> None:
    """manifests/ is the golden directory: after a config or renderer change, run
    `gangway manifests render` and review the diff."""
    assert render(load_config(EXAMPLE)) == files
    assert differences(files, REPO / "manifests") == []


def test_crd_objects_validate_against_the_upstream_schemas(files: dict[str, str]) -> None:
    from gangway.lint import CrdSchemas
    from gangway.lint.structural import validate_structure

    schemas = CrdSchemas.from_env()
    if schemas is None:
        pytest.skip("GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs")
    custom = [(p, o) for p, o in _objects(files) if "." in o["apiVersion"].split("/")[0]]
    kinds = {o["kind"] for _, o in custom}
    assert {"Queue", "HyperNode", "PodMonitor", "ServiceMonitor"} <= kinds
    for path, obj in custom:
        if obj["apiVersion"].startswith(("admissionregistration.", "rbac.", "scheduling.k8s")):
            continue  # core API groups: checked below
        found = validate_structure(obj, schemas, f"{path}: {obj['kind']}")
        assert not found, found


def test_core_objects_validate_against_the_kubernetes_schemas(files: dict[str, str]) -> None:
    import kubernetes_validate

    core = [
        (p, o)
        for p, o in _objects(files)
        if "." not in o["apiVersion"].split("/")[0] or o["apiVersion"].endswith(".k8s.io/v1")
    ]
    assert {"Namespace", "Role", "PriorityClass", "Deployment", "ConfigMap"} <= {
        o["kind"] for _, o in core
    }
    for path, obj in core:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{path}: {obj['kind']}/{obj['metadata']['name']}: {e.message}")


def test_each_overlay_builds_with_kustomize(files: dict[str, str], tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: it builds the overlays (kubectl kustomize)")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for cluster in load_config(EXAMPLE).clusters:
        built = subprocess.run(
            [kubectl, "kustomize", str(tmp_path / "overlays" / cluster)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert built.returncode == 0, built.stderr
        kinds = {d["kind"] for d in yaml.safe_load_all(built.stdout) if d}
        assert {"Queue", "PriorityClass", "Role", "ConfigMap"} <= kinds


def test_the_workflow_service_account_gets_exactly_what_a_pipeline_needs(
    files: dict[str, str],
) -> None:
    """Every verb granted, and why; nothing cluster-wide."""
    granted = {
        (rule["apiGroups"][0], rule["resources"][0], verb)
        for _, o in _objects(files)
        if o["kind"] == "Role"
        for rule in o["rules"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("batch.volcano.sh", "jobs", "create"),
        ("batch.volcano.sh", "jobs", "get"),
        ("batch.volcano.sh", "jobs", "list"),
        ("batch.volcano.sh", "jobs", "watch"),
        ("argoproj.io", "workflowtaskresults", "create"),
        ("argoproj.io", "workflowtaskresults", "patch"),
        ("", "pods/log", "get"),
    }
    assert all(why for *_, why in RBAC_RULES)
    cluster_wide = {
        o["metadata"]["name"]
        for _, o in _objects(files)
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
    }
    assert cluster_wide == {"gangway-exporter"}  # read-only: see the exporter's test


def test_the_reference_pipeline_references_what_the_manifests_create(
    files: dict[str, str],
) -> None:
    """Its team's queue, its default priority class and its semaphore all exist."""
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    labels = wt["metadata"]["labels"]
    params = {p["name"]: p["value"] for p in wt["spec"]["arguments"]["parameters"]}
    ref = wt["spec"]["synchronization"]["semaphores"][0]["configMapKeyRef"]
    team = load_config(EXAMPLE).team_views()[labels["gangway.dev/team"]]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for _, o in _objects(files):
        by_kind.setdefault(o["kind"], []).append(o)
    assert labels["gangway.dev/queue"] in {q["metadata"]["name"] for q in by_kind["Queue"]}
    assert params["priority-class"] in {p["metadata"]["name"] for p in by_kind["PriorityClass"]}
    assert params["priority-class"] in team.priority_classes
    semaphores = [
        c
        for c in by_kind["ConfigMap"]
        if c["metadata"]["name"] == ref["name"] and c["metadata"].get("namespace") == team.namespace
    ]
    assert semaphores and semaphores[0]["data"][ref["key"]] == str(team.max_workflows)


def test_queues_are_hierarchical(files: dict[str, str]) -> None:
    queues = {o["metadata"]["name"]: o["spec"] for _, o in _objects(files) if o["kind"] == "Queue"}
    assert queues["frontier"]["parent"] == "root"
    assert queues["research"]["parent"] == queues["evals"]["parent"] == "frontier"
    assert queues["platform"]["parent"] == "root"
    scheduler = next(
        yaml.safe_load(o["data"]["volcano-scheduler.conf"])
        for _, o in _objects(files)
        if o["metadata"]["name"] == "volcano-scheduler-configmap"
    )
    plugins = [p["name"] for tier in scheduler["tiers"] for p in tier["plugins"]]
    assert "capacity" in plugins and "proportion" not in plugins
    assert scheduler["actions"] == "enqueue, allocate, preempt, reclaim, backfill"


def test_the_cli_renders_diffs_and_refuses_a_bad_config(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    res = gangway("manifests", "render", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "overlays" / "us-east" / "kustomization.yaml").is_file()
    assert gangway("manifests", "render", "--diff", str(out)).returncode == 0
    (out / "base" / "queues.yaml").write_text("# edited by hand\n")
    drift = gangway("manifests", "render", "--diff", str(out))
    assert drift.returncode == 1 and "+kind: Queue" in drift.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        EXAMPLE.read_text().replace(
            "default_priority_class: gangway-normal", "default_priority_class: x"
        )
    )
    res = gangway("manifests", "render", "--config", str(bad), "-o", str(out))
    assert res.returncode == 1 and "default_priority_class: 'x'" in res.stderr
    assert "Traceback" not in res.stderr
    (tmp_path / "afile").write_text("")
    res = gangway("manifests", "render", "-o", str(tmp_path / "afile"))
    assert res.returncode == 1 and "-o" in res.stderr and "not a directory" in res.stderr
    res = gangway("manifests", "render", "--diff", str(tmp_path / "nowhere"))
    assert res.returncode == 1 and "no such directory" in res.stderr


def test_a_render_removes_only_what_it_rendered_there(
    files: dict[str, str], tmp_path: Path
) -> None:
    """Stale rendered files in its own layout go; anything else under -o stays — a copy of a
    rendered file elsewhere, another render in a subdirectory, hand-written files."""
    from gangway.render import write

    out = tmp_path / "manifests"
    write(files, out)
    gone = out / "overlays" / "old-cluster" / "topology.yaml"
    gone.parent.mkdir(parents=True)
    gone.write_text(files["overlays/us-east/topology.yaml"])
    kept = [
        out / "overlays" / "us-east" / "my-patch.yaml",
        out / "infra" / "other" / "base" / "queues.yaml",
        out / "base" / "notes" / "copy.yaml",
    ]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files["base/queues.yaml"] if "queues" in path.name else "a: 1\n")
    assert write(files, out) == ["overlays/old-cluster/topology.yaml"]
    assert not gone.exists() and all(p.exists() for p in kept)


def test_the_pod_monitor_scrapes_what_the_compiled_steps_expose(files: dict[str, str]) -> None:
    """Each cluster with a Prometheus gets the steps' PodMonitor: the team namespaces, the pods
    every step has (the pipeline label), the port they serve on, their identity copied onto the
    series under plain names, the step's own labels winning."""
    from gangway.contract import METRICS_PORT_NAME
    from gangway.render.monitoring import POD_MONITOR, TARGET_LABELS

    cfg = load_config(EXAMPLE)
    monitors = [
        (p, o)
        for p, o in _objects(files)
        if o["kind"] == "PodMonitor" and o["metadata"]["name"] == POD_MONITOR
    ]
    assert sorted(p for p, _ in monitors) == sorted(
        f"overlays/{c}/monitoring.yaml" for c, v in cfg.clusters.items() if v.prometheus_url
    )
    (_, pm), *_ = monitors
    spec = pm["spec"]
    namespaces = {t.namespace for t in cfg.team_views().values()}
    assert set(spec["namespaceSelector"]["matchNames"]) == namespaces
    (expr,) = spec["selector"]["matchExpressions"]
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == METRICS_PORT_NAME and endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True
    renamed = {r["targetLabel"] for r in endpoint["relabelings"]}
    assert (
        renamed == {"team", "queue", "pipeline", "step", "workflow"} == set(TARGET_LABELS.values())
    )
    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    assert expr == {"key": "gangway.dev/pipeline", "operator": "Exists"}
    assert expr["key"] in wt["spec"]["podMetadata"]["labels"]


def test_the_lineage_followers_serve_their_backlog_to_a_pod_monitor(files: dict[str, str]) -> None:
    """The LineageSpoolBacklog alert's series: each follower serves --metrics-port on its
    `metrics` port, and a PodMonitor selects the followers' pods in every team namespace."""
    from gangway.contract import METRICS_PORT, METRICS_PORT_NAME
    from gangway.render.monitoring import FOLLOWER_MONITOR

    objs = list(_objects(files))
    followers = [
        o for p, o in objs if o["kind"] == "Deployment" and p.endswith("lineage-sync.yaml")
    ]
    assert followers
    for d in followers:
        pod = d["spec"]["template"]
        (c,) = pod["spec"]["containers"]
        assert f"--metrics-port={METRICS_PORT}" in c["args"]
        assert {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"} in c[
            "ports"
        ]
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == FOLLOWER_MONITOR
    monitors = [o for _, o in objs if o["kind"] == "PodMonitor"]
    (fm, *_) = [m for m in monitors if m["metadata"]["name"] == FOLLOWER_MONITOR]
    assert fm["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": FOLLOWER_MONITOR}}
    assert fm["spec"]["podMetricsEndpoints"][0]["port"] == METRICS_PORT_NAME


def _with_clusters(cfg: Any, **fields: Any) -> Any:
    """``cfg`` with ``fields`` set on every cluster (the config is frozen)."""
    clusters = {n: c.model_copy(update=fields) for n, c in cfg.clusters.items()}
    return cfg.model_copy(update={"clusters": clusters})


def test_a_cluster_without_prometheus_gets_no_pod_monitor() -> None:
    cfg = _with_clusters(load_config(EXAMPLE), prometheus_url=None)
    assert not any("monitoring.yaml" in p for p in render(cfg))


def _links(cfg: Any, cluster: str) -> list[dict[str, str]]:
    from gangway.render.argo import controller_configmap

    links: list[dict[str, str]] = yaml.safe_load(
        controller_configmap(cfg, cluster)["data"]["links"]
    )
    return links


def test_the_argo_ui_links_to_the_metrics_dashboard_where_one_is_set() -> None:
    cfg = load_config(EXAMPLE)
    name, cluster = next(iter(cfg.clusters.items()))
    assert cluster.dashboard_url
    link = {"name": "Metrics dashboard", "scope": "workflow", "url": cluster.dashboard_url}
    assert _links(cfg, name)[-1] == link
    plain = _with_clusters(cfg, dashboard_url=None)
    assert [x["name"] for x in _links(plain, name)] == ["MLflow run", "MLflow experiment"]
    no_mlflow = _with_clusters(cfg, mlflow_url=None).model_copy(
        update={"mlflow": cfg.mlflow.model_copy(update={"ui_url": None})}
    )
    assert _links(no_mlflow, name) == [link]


def test_the_exporter_reads_only_what_a_live_snapshot_lists(files: dict[str, str]) -> None:
    """Per cluster with a Prometheus: get and list on the kinds `scheduling/snapshot/live.py`
    lists, nothing that writes; its Deployment runs `gangway exporter --cluster NAME` as
    non-root with a read-only root file system; the ServiceMonitor scrapes its Service."""
    from gangway.config import CONFIG_ENV

    cfg = load_config(EXAMPLE)
    scraped = sorted(c for c, v in cfg.clusters.items() if v.prometheus_url)
    assert sorted(p.split("/")[1] for p in files if p.endswith("/exporter.yaml")) == scraped
    for cluster in scraped:
        objs = {
            o["kind"]: o
            for o in yaml.safe_load_all(files[f"overlays/{cluster}/exporter.yaml"])
            if o
        }
        granted = {
            (group, resource, verb)
            for rule in objs["ClusterRole"]["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
        reads = [
            ("", "nodes"),
            ("", "pods"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("scheduling.volcano.sh", "queues"),
            ("scheduling.volcano.sh", "podgroups"),
            ("topology.volcano.sh", "hypernodes"),
        ]
        assert granted == {(g, r, v) for g, r in reads for v in ("get", "list")}
        namespace = cfg.clusters[cluster].namespace
        (subject,) = objs["ClusterRoleBinding"]["subjects"]
        assert subject == {
            "kind": "ServiceAccount",
            "name": "gangway-exporter",
            "namespace": namespace,
        }
        pod = objs["Deployment"]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["command"] + c["args"][:3] == [
            "gangway", "exporter", f"--cluster={cluster}", "--host=0.0.0.0", "--port=9401",
        ]  # fmt: skip
        sec = c["securityContext"]
        assert (
            sec["readOnlyRootFilesystem"]
            and sec["runAsNonRoot"]
            and not sec["allowPrivilegeEscalation"]
        )
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        env = {e["name"]: e["value"] for e in c["env"]}
        config = yaml.safe_load(objs["ConfigMap"]["data"]["platform.yaml"])
        assert env[CONFIG_ENV].endswith("/platform.yaml") and cluster in config["clusters"]
        assert pod["serviceAccountName"] == objs["ServiceAccount"]["metadata"]["name"]
        (endpoint,) = objs["ServiceMonitor"]["spec"]["endpoints"]
        (port,) = objs["Service"]["spec"]["ports"]
        assert endpoint["port"] == port["name"] and port["port"] == 9401
        selector = objs["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= objs["Service"]["metadata"]["labels"].items()
        assert objs["Service"]["spec"]["selector"].items() <= pod_labels(objs["Deployment"]).items()
    plain = _with_clusters(cfg, prometheus_url=None)
    assert not any("exporter.yaml" in p for p in render(plain))


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels
