"""``gangway doctor`` on recorded API objects: the example config's eu-west as the API returns
it once its overlay is applied (tests/data/doctor-eu-west.yaml holds what no rendering makes:
CRDs, controllers, Volcano's own queues; the rendered objects come back with what the API
server adds), and drifted copies of it, each giving its finding and the command that fixes
it. The on_cluster test reads a real cluster when one is configured."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml

from gangway.cluster import doctor as doctor_module
from gangway.cluster.doctor import doctor
from gangway.config import EXAMPLE, PlatformConfig, load_config
from gangway.lint.drift import Drift, Rendered, compare, rendered_objects
from gangway.render import render
from tests.helpers import REPO, cli, cli_process

RECORDED = REPO / "tests" / "data" / "doctor-eu-west.yaml"
CONTEXT = "gangway-eu-west"
Objects = list[dict[str, Any]]


def _served(obj: dict[str, Any], n: int) -> dict[str, Any]:
    """``obj`` as the API server returns it once applied: identity and bookkeeping in its
    metadata, a status, and a Queue's amounts in other units (the same quantities)."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta.update(uid=f"0b5e6c2a-{n:04d}", resourceVersion=str(1000 + n), generation=1)
    meta["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    if out["kind"] == "Queue":
        spec = out["spec"]
        for quota in (spec.get("deserved"), spec.get("capability")):
            if quota and str(quota.get("memory", "")).endswith("Ti"):
                quota["memory"] = f"{int(quota['memory'][:-2]) * 1024}Gi"
        out["status"] = {"state": "Open", "allocated": {"cpu": "0"}}
    if out["kind"] == "Deployment":
        out["spec"].setdefault("revisionHistoryLimit", 10)
        out["status"] = {"replicas": 1, "readyReplicas": 1}
    if out["kind"] == "ConfigMap" and out["metadata"]["name"] == "workflow-controller-configmap":
        out["data"]["metricsConfig"] = "enabled: true\n"  # the Helm chart's own, not rendered
    return out


def _rendered(cfg: PlatformConfig | None = None) -> list[Rendered]:
    return rendered_objects(render(cfg or load_config(EXAMPLE)), "eu-west")


def _matching(rendered: Sequence[Rendered]) -> Objects:
    recorded: Objects = yaml.safe_load(RECORDED.read_text())["items"]
    return recorded + [_served(o, i) for i, (_, o) in enumerate(rendered)]


def _find(objs: Objects, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def _drop(objs: Objects, kind: str, name: str) -> None:
    objs.remove(_find(objs, kind, name))


def _compare(rendered: Sequence[Rendered], live: Objects) -> Drift:
    return compare(rendered, live, cluster="eu-west", context=CONTEXT)


def test_a_matching_cluster_is_all_ok() -> None:
    """What the API server adds (uids, statuses, defaults, a key of the Helm chart's own) and
    amounts in other units (12Ti on the cluster as 12288Gi) are not differences."""
    rendered = _rendered()
    drift = _compare(rendered, _matching(rendered))
    assert drift.matches, [str(f) for c in drift.checks for f in c.findings]
    assert [f for c in drift.checks for f in c.findings] == []
    names = [c.name for c in drift.checks]
    assert names[0] == "crds"
    for expected in ("queues", "priority classes", "volcano scheduler", "admission policies"):
        assert expected in names
    assert {"argo controller", "monitoring"} <= set(names)


def _queue_deserved(live: Objects) -> None:
    _find(live, "Queue", "research")["spec"]["deserved"]["cpu"] = "512"


def _podmonitor_crd_older(live: Objects) -> None:
    crd = _find(live, "CustomResourceDefinition", "podmonitors.monitoring.coreos.com")
    crd["metadata"]["annotations"]["operator.prometheus.io/version"] = "0.88.0"


def _volcano_older(live: Objects) -> None:
    pod = _find(live, "Deployment", "volcano-scheduler")["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = "docker.io/volcanosh/vc-scheduler:v1.13.0"


def _no_dashboard_link(live: Objects) -> None:
    data = _find(live, "ConfigMap", "workflow-controller-configmap")["data"]
    links = [x for x in yaml.safe_load(data["links"]) if x["name"] != "Metrics dashboard"]
    data["links"] = yaml.safe_dump(links)


def _extra_queue(live: Objects) -> None:
    live.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "old-team"},
            "spec": {"parent": "root", "weight": 1},
        }
    )


def _proportion(live: Objects) -> None:
    data = _find(live, "ConfigMap", "volcano-scheduler-configmap")["data"]
    data["volcano-scheduler.conf"] = data["volcano-scheduler.conf"].replace(
        "name: capacity", "name: proportion"
    )


def _priority(live: Objects) -> None:
    _find(live, "PriorityClass", "gangway-batch")["value"] = 500


APPLY = f"kubectl --context {CONTEXT} apply -f manifests/"


@pytest.mark.parametrize(
    ("drift", "check", "says", "fix"),
    [
        pytest.param(
            _queue_deserved,
            "queues",
            "Queue/research spec.deserved.cpu: '512' on the cluster, '768' rendered",
            APPLY + "base/queues.yaml",
            id="queue-deserved-changed",
        ),
        pytest.param(
            _podmonitor_crd_older,
            "crds",
            "prometheus-operator v0.93.0 version: 0.88.0 (CRD podmonitors.monitoring.coreos.com"
            " (operator.prometheus.io/version)): older than the v0.93.0 Gangway targets",
            f"kubectl --context {CONTEXT} apply --server-side -f https://github.com/"
            "prometheus-operator/prometheus-operator/releases/download/v0.93.0/"
            "stripped-down-crds.yaml",
            id="crd-at-an-older-version",
        ),
        pytest.param(
            _volcano_older,
            "crds",
            "Volcano v1.15.1 version: v1.13.0 (Deployment/volcano-system/volcano-scheduler image"
            " docker.io/volcanosh/vc-scheduler:v1.13.0): older than the v1.15.1 Gangway targets",
            f"helm --kube-context {CONTEXT} upgrade --install volcano volcano-sh/volcano "
            "-n volcano-system --version 1.15.1",
            id="volcano-controller-older",
        ),
        pytest.param(
            lambda live: _drop(live, "PodMonitor", "gangway-steps"),
            "monitoring",
            "PodMonitor/argo/gangway-steps: missing on the cluster",
            APPLY + "overlays/eu-west/monitoring.yaml",
            id="podmonitor-missing",
        ),
        pytest.param(
            _no_dashboard_link,
            "argo controller",
            "ConfigMap/argo/workflow-controller-configmap data.links[Metrics dashboard]: "
            "missing on the cluster",
            APPLY + "overlays/eu-west/argo-controller.yaml",
            id="dashboard-link-missing",
        ),
        pytest.param(
            _extra_queue,
            "queues",
            "Queue/old-team: on the cluster, not in the platform config",
            f"kubectl --context {CONTEXT} delete queues.scheduling.volcano.sh old-team",
            id="extra-queue",
        ),
        pytest.param(
            _proportion,
            "volcano scheduler",
            "ConfigMap/volcano-system/volcano-scheduler-configmap "
            "data.volcano-scheduler.conf.tiers[1].plugins[capacity]: missing on the cluster",
            APPLY + "base/volcano-scheduler.yaml",
            id="scheduler-plugin-swapped",
        ),
        pytest.param(
            _priority,
            "priority classes",
            "PriorityClass/gangway-batch value: '500' on the cluster, '1000' rendered",
            APPLY + "base/priority-classes.yaml",
            id="priority-class-value",
        ),
        pytest.param(
            lambda live: _drop(live, "ValidatingAdmissionPolicyBinding", "gangway-restricted-pods"),
            "admission policies",
            "ValidatingAdmissionPolicyBinding/gangway-restricted-pods: missing on the cluster",
            APPLY + "base/admission-policies.yaml",
            id="admission-binding-missing",
        ),
        pytest.param(
            lambda live: _drop(
                live, "CustomResourceDefinition", "podmonitors.monitoring.coreos.com"
            ),
            "crds",
            "CRD PodMonitor.monitoring.coreos.com: no CRD serves this kind: not installed",
            f"kubectl --context {CONTEXT} apply --server-side -f https://github.com/"
            "prometheus-operator/prometheus-operator/releases/download/v0.93.0/"
            "stripped-down-crds.yaml",
            id="prometheus-operator-missing",
        ),
    ],
)
def test_a_drifted_cluster_names_the_difference_and_its_fix(
    drift: Callable[[Objects], None], check: str, says: str, fix: str
) -> None:
    rendered = _rendered()
    live = _matching(rendered)
    drift(live)
    result = _compare(rendered, live)
    assert not result.matches
    found = [
        (c.name, f"{f.obj} {f.path}".strip() + f": {f.message}", f.hint)
        for c in result.checks
        for f in c.findings
        if f.severity == "error"
    ]
    assert {(name, hint) for name, _, hint in found} == {(check, fix)}, found
    assert any(text.startswith(says) for _, text, _ in found), found


def test_the_exporter_missing_is_found_in_its_own_check() -> None:
    """The platform exporter's Deployment, where the rendering has one (an object any new
    rendered file adds is compared under that file's name, with no change to the doctor)."""
    rendered = _rendered()
    exporters = [(r, o) for r, o in rendered if o["kind"] == "Deployment" and "exporter" in r]
    if not exporters:  # rendered by `gangway manifests render` once the exporter lands there
        exporter = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gangway-exporter", "namespace": "argo"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "x"}]}}},
        }
        exporters = [("overlays/eu-west/exporter.yaml", exporter)]
        rendered = [*rendered, *exporters]
    live = _matching(rendered)
    rel, obj = exporters[0]
    _drop(live, "Deployment", obj["metadata"]["name"])
    result = _compare(rendered, live)
    findings = [(c.name, f) for c in result.checks for f in c.findings]
    assert len(findings) == 1, findings
    name, f = findings[0]
    ns = obj["metadata"]["namespace"]
    assert (f.obj, f.message) == (
        f"Deployment/{ns}/{obj['metadata']['name']}",
        "missing on the cluster",
    )
    assert f.hint == f"kubectl --context {CONTEXT} apply -f manifests/{rel}"
    assert name == rel.rsplit("/", 1)[-1].removesuffix(".yaml").replace("-", " ")


def test_without_prometheus_no_monitoring_is_asked_for() -> None:
    """A cluster without ``prometheus_url`` gets no PodMonitor, so neither it nor the
    Prometheus operator's CRDs are checked."""
    cfg = load_config(EXAMPLE)
    clusters = dict(cfg.clusters)
    clusters["eu-west"] = clusters["eu-west"].model_copy(update={"prometheus_url": None})
    rendered = _rendered(cfg.model_copy(update={"clusters": clusters}))
    live = [
        o
        for o in _matching(rendered)
        if "monitoring.coreos.com" not in str(o.get("spec", {}).get("group"))
    ]
    drift = _compare(rendered, live)
    assert drift.matches, [str(f) for c in drift.checks for f in c.findings]
    assert "monitoring" not in [c.name for c in drift.checks]


def test_an_unknown_version_is_a_warning_not_a_difference() -> None:
    rendered = _rendered()
    live = [o for o in _matching(rendered) if o["metadata"]["name"] != "workflow-controller"]
    drift = _compare(rendered, live)
    assert drift.matches
    (warning,) = [f for c in drift.checks for f in c.findings]
    assert warning.severity == "warning" and warning.obj == "Argo Workflows v4.1.2"
    assert "cannot tell its version" in warning.message


def _reader(live: Objects) -> Callable[[str, Sequence[tuple[str, str, str]]], Objects]:
    def read(context: str, kinds: Sequence[tuple[str, str, str]]) -> Objects:
        assert context == CONTEXT
        assert ("scheduling.volcano.sh/v1beta1", "Queue", "") in kinds
        return live

    return read


def test_doctor_renders_in_process_and_reads_through_the_reader() -> None:
    cfg = load_config(EXAMPLE)
    live = _matching(_rendered())
    _queue_deserved(live)
    drift = doctor(cfg, "eu-west", reader=_reader(live), manifests="deploy/manifests/")
    (f,) = [f for c in drift.checks for f in c.findings]
    assert f.hint == f"kubectl --context {CONTEXT} apply -f deploy/manifests/base/queues.yaml"
    assert (
        drift.apply_all == f"kubectl --context {CONTEXT} apply -k deploy/manifests/overlays/eu-west"
    )


def test_the_command_prints_a_table_at_80_columns_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    live = _matching(_rendered())
    monkeypatch.setattr(doctor_module, "read_cluster", _reader(live))
    ok = cli("doctor", "--cluster", "eu-west", env={"COLUMNS": "80"})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "The cluster matches its rendering." in ok.stdout
    assert max(len(line) for line in ok.stdout.splitlines()) <= 80, ok.stdout
    _queue_deserved(live)
    _no_dashboard_link(live)
    bad = cli("doctor", "--cluster", "eu-west", env={"COLUMNS": "80"})
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "✗ Queue/research spec.deserved.cpu: '512' on the cluster, '768' rendered" in bad.stdout
    assert f"  fix: kubectl --context {CONTEXT} apply -f manifests/base/queues.yaml" in bad.stdout
    assert max(len(line) for line in bad.stdout.splitlines()) <= 80, bad.stdout
    as_json = cli("doctor", "--cluster", "eu-west", "--output", "json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["matches"] is False
    assert {(f["check"], f["object"], f["path"]) for f in doc["findings"]} == {
        ("queues", "Queue/research", "spec.deserved.cpu"),
        (
            "argo controller",
            "ConfigMap/argo/workflow-controller-configmap",
            "data.links[Metrics dashboard]",
        ),
    }


def test_no_cluster_reachable_is_one_error_line(tmp_path: Any) -> None:
    """A kube context whose API server does not answer (a closed loopback port): the real
    reader, one ``error:`` line, exit 75 (a process: the kubernetes client reads KUBECONFIG
    when it is imported)."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": CONTEXT, "context": {"cluster": "c", "user": "u"}}],
                "current-context": CONTEXT,
            }
        )
    )
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    res = cli_process("doctor", "--cluster", "eu-west", env=env, timeout=120)
    assert res.returncode == 75, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: context {CONTEXT}: cannot reach the API server"
    ), res.stderr
    env["KUBECONFIG"] = str(tmp_path / "none")
    missing = cli_process("doctor", "--cluster", "eu-west", env=env, timeout=120)
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"error: cannot load kube context {CONTEXT}"), missing.stderr


@pytest.mark.on_cluster
def test_doctor_reads_a_real_cluster() -> None:
    """With a kube context holding Argo and Volcano, the live reader's objects compare without
    an error (the differences are the cluster's own)."""
    context = os.environ.get("GANGWAY_KUBE_CONTEXT")
    if not (context and os.environ.get("KUBECONFIG")):
        pytest.skip(
            "no cluster configured: set KUBECONFIG and GANGWAY_KUBE_CONTEXT (a cluster with "
            "Argo and Volcano) to run the on_cluster tier"
        )
    rendered = _rendered()
    kinds = [(o["apiVersion"], o["kind"], o["metadata"].get("namespace", "")) for _, o in rendered]
    live = doctor_module.read_cluster(context, kinds)
    assert any(o["kind"] == "CustomResourceDefinition" for o in live)
    drift = _compare(rendered, live)
    assert drift.checks[0].name == "crds"
