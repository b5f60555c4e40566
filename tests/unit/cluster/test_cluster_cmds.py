"""submit / deploy / status without a cluster: plans are pure, applying is create-or-update
over a small in-memory Argo API, status renders an Argo API Workflow object; the on_cluster
test submits the reference pipeline when a real cluster is configured."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.cli import cluster_cmds
from gangway.cluster.logs import select_pods
from gangway.cluster.settings import ClusterConfig, resolve_cluster
from gangway.cluster.status import summarize
from gangway.cluster.submission import apply_plan, deploy_plan, submit_plan
from gangway.config import EXAMPLE
from gangway.contract import WORKFLOW_IDENTITY_ENV
from gangway.errors import PermanentError
from gangway.lineage.records import workflow_from_env
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO
from tests.helpers import gangway_without_argo_env as _gangway
from tests.helpers.servers import DIGEST, FakeRegistry, runtime_registry, serve

DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")


class InMemoryArgo:
    """Stores objects like the Argo server does (resourceVersion, generateName)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((kind, name)))

    def create(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("name", meta.get("generateName", "x-") + f"{len(self.objects):05d}")
        meta["resourceVersion"] = "1"
        self.objects[(obj["kind"], meta["name"])] = obj
        self.calls.append(f"create {obj['kind']}")
        return obj

    def update(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        current = self.objects[(obj["kind"], obj["metadata"]["name"])]
        assert obj["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        self.calls.append(f"update {obj['kind']}")
        return obj


def test_submit_plan_is_template_then_workflow_from_it(template: dict[str, Any]) -> None:
    plan = submit_plan(template, {"train-steps": "50"}, "research")
    (wt,) = plan.upserts
    assert wt["kind"] == "WorkflowTemplate" and wt["metadata"]["namespace"] == "research"
    assert plan.run is not None
    assert plan.run["spec"]["workflowTemplateRef"] == {"name": "train-eval-infer"}
    assert plan.run["spec"]["arguments"]["parameters"] == [{"name": "train-steps", "value": "50"}]
    assert plan.run["metadata"]["generateName"] == "train-eval-infer-"
    with pytest.raises(PermanentError, match=r"unknown parameter.*trainsteps"):
        submit_plan(template, {"trainsteps": "5"}, "research")


def test_apply_is_create_or_update_and_idempotent(template: dict[str, Any]) -> None:
    argo = InMemoryArgo()
    done, _ = apply_plan(deploy_plan([template], "ns"), argo)
    assert done == ["created WorkflowTemplate/train-eval-infer"]
    done, _ = apply_plan(deploy_plan([template], "ns"), argo)
    assert done == ["unchanged WorkflowTemplate/train-eval-infer"]
    changed = copy.deepcopy(template)
    changed["spec"]["arguments"]["parameters"][0]["value"] = "ghcr.io/gangway/runtime:v2"
    done, _ = apply_plan(deploy_plan([changed], "ns"), argo)
    assert done == ["updated WorkflowTemplate/train-eval-infer"]
    done, wf = apply_plan(submit_plan(changed, {}, "ns"), argo)
    assert wf is not None and wf["metadata"]["name"].startswith("train-eval-infer-")
    assert argo.calls == ["create WorkflowTemplate", "update WorkflowTemplate", "create Workflow"]


@pytest.mark.parametrize(
    ("labels", "namespace"),
    [
        pytest.param({"gangway.dev/team": "research"}, "team-research", id="a-known-team"),
        pytest.param({"gangway.dev/team": "nobody"}, "argo", id="an-unknown-team-falls-back"),
        pytest.param({}, "argo", id="no-team-label-falls-back"),
    ],
)
def test_a_workflow_goes_to_its_teams_namespace(labels: dict[str, str], namespace: str) -> None:
    from gangway.cluster.submission import team_namespace
    from gangway.config import load_config

    obj = {"metadata": {"labels": labels}}
    assert team_namespace(obj, load_config(EXAMPLE), "argo") == namespace


@pytest.mark.parametrize(
    ("file", "given", "cluster", "expected"),
    [
        pytest.param(
            "p.yaml", {}, "eu-west", {"cluster": "eu-west", "storage-root": "s3://*"}, id="yaml"
        ),
        pytest.param("p.yaml", {}, "env", {}, id="yaml-to-an-argo-server-from-the-env"),
        pytest.param(
            "p.yaml",
            {"cluster": "x", "storage-root": "s3://mine"},
            "eu-west",
            {},
            id="given-values-stand",
        ),
        pytest.param("p.py", {}, "mars", {"cluster": "mars", "git-sha": "*"}, id="python-file"),
    ],
)
def test_submit_fills_in_provenance_and_the_regions_bucket(
    template: dict[str, Any],
    file: str,
    given: dict[str, str],
    cluster: str,
    expected: dict[str, str],
) -> None:
    from gangway.config import load_config
    from gangway.workflows.provenance import submit_provenance

    cfg = load_config(EXAMPLE)
    pipeline = REPO / "pipelines" / file
    out = submit_provenance(pipeline, template, given, cluster=cluster, config=cfg)
    assert set(out) == set(expected)
    if "storage-root" in out:
        region = cfg.clusters[cluster].region
        assert out["storage-root"] == cfg.storage.buckets[region]


def test_deploy_refuses_a_plain_workflow(template: dict[str, Any]) -> None:
    wf = {**template, "kind": "Workflow"}
    with pytest.raises(PermanentError, match="use `gangway submit`"):
        deploy_plan([wf], "ns")


def test_status_summary_of_an_argo_workflow_object() -> None:
    state = summarize(json.loads((DATA / "workflow_status.json").read_text()))
    assert (state.name, state.phase, state.seconds) == ("train-eval-infer-x7k2p", "Failed", 570)
    rows = {s.name: s for s in state.steps}
    assert list(rows) == ["stage", "train", "evaluate", "infer"]
    assert rows["stage"].attempts == 2 and rows["stage"].seconds == 70
    assert rows["train"].outputs["job-phase"] == "Completed"
    assert rows["train"].outputs["job-restarts"] == "1"
    assert rows["evaluate"].phase == "Failed" and "No more retries" in rows["evaluate"].message
    assert rows["infer"].attempts == 0 and rows["infer"].phase == "Omitted"


def test_log_pod_selection_includes_gang_pods() -> None:
    pods = [
        {
            "metadata": {
                "name": "wf-stage-1",
                "creationTimestamp": "2026-11-29T10:00:01Z",
                "annotations": {"workflows.argoproj.io/node-name": "wf.stage(0)"},
            }
        },
        {
            "metadata": {
                "name": "wf-train-q8z4w-master-0",
                "creationTimestamp": "2026-11-29T10:01:13Z",
                "labels": {"gangway.dev/step": "train"},
            }
        },
        {
            "metadata": {
                "name": "wf-train-q8z4w-worker-0",
                "creationTimestamp": "2026-11-29T10:01:14Z",
                "labels": {"gangway.dev/step": "train"},
            }
        },
    ]
    assert select_pods(pods, None) == [
        "wf-stage-1",
        "wf-train-q8z4w-master-0",
        "wf-train-q8z4w-worker-0",
    ]
    assert select_pods(pods, "train") == ["wf-train-q8z4w-master-0", "wf-train-q8z4w-worker-0"]
    assert select_pods(pods, "stage") == ["wf-stage-1"]


def test_cluster_from_env_and_config(tmp_path: Path) -> None:
    c = resolve_cluster(
        None,
        {"ARGO_SERVER": "argo.example:2746", "ARGO_TOKEN": "abc", "ARGO_NAMESPACE": "research"},
    )
    assert (c.base_url, c.token, c.namespace) == (
        "https://argo.example:2746",
        "Bearer abc",
        "research",
    )
    assert c.workflow_url("wf-1") == "https://argo.example:2746/workflows/research/wf-1"
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["clusters"] |= {
        "east": {
            **raw["clusters"]["us-east"],
            "argo_server": "https://argo-east",
            "namespace": "ml",
            "token_env": "EAST_TOKEN",
            "argo_ui": "https://ui-east",
        }
    }
    cfg = tmp_path / "gangway.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    east = resolve_cluster("east", {"GANGWAY_CONFIG": str(cfg), "EAST_TOKEN": "Bearer t"})
    assert (east.namespace, east.token) == ("ml", "Bearer t")
    assert east.workflow_url("wf") == "https://ui-east/workflows/ml/wf"
    assert east.mlflow_url == raw["mlflow"]["ui_url"]
    with pytest.raises(PermanentError, match="no cluster configured"):
        resolve_cluster(None, {})
    with pytest.raises(PermanentError, match="known: east"):
        resolve_cluster("west", {"GANGWAY_CONFIG": str(cfg)})
    # without GANGWAY_CONFIG, the example's clusters
    assert resolve_cluster("eu-west", {}).kube_context == "gangway-eu-west"


def test_submit_dry_run_prints_the_exact_objects() -> None:
    res = _gangway(
        "submit", "pipelines/train_eval_infer.py", "-p", "nodes=4", "--dry-run", "--no-pin-image"
    )
    assert res.returncode == 0, res.stderr
    wt, wf = [d for d in yaml.safe_load_all(res.stdout) if d]
    assert wt["kind"] == "WorkflowTemplate" and wf["kind"] == "Workflow"
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert params["nodes"] == "4" and params["cluster"] == "env"
    assert len(params["git-sha"].removesuffix("-dirty")) == 40  # recorded on the MLflow run
    # in the team's namespace, where its service account, RBAC and semaphore are
    assert wt["metadata"]["namespace"] == wf["metadata"]["namespace"] == "team-research"


def test_submit_to_a_cluster_writes_to_the_bucket_of_its_region() -> None:
    res = _gangway(
        "submit",
        "pipelines/train_eval_infer.py",
        "--cluster",
        "eu-west",
        "--dry-run",
        "--no-pin-image",
        env={"GANGWAY_MLFLOW_URL": ""},
    )
    assert res.returncode == 0, res.stderr
    wf = [d for d in yaml.safe_load_all(res.stdout) if d][-1]
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert params["storage-root"] == "s3://gangway-artifacts-eu-west-1"
    assert params["cluster"] == "eu-west"


def test_without_a_cluster_the_error_says_what_to_set() -> None:
    for cmd in (["submit", "pipelines/train_eval_infer.py"], ["status", "wf-1"]):
        res = _gangway(*cmd)
        assert res.returncode == 1
        assert "no cluster configured" in res.stderr and "Traceback" not in res.stderr


PIPE = "pipelines/train_eval_infer.py"
V2 = b'{"schemaVersion": 2, "manifests": [], "annotations": {"v": "2"}}'


def _registry_env(tmp_path: Path, host: str) -> dict[str, str]:
    """The example platform config with its image on the registry at ``host`` (allowed), and
    credentials read from tmp_path (none)."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["registries"].append(f"{host}/")
    raw["image"] = f"{host}/gangway/runtime:v1"
    cfg = tmp_path / "gangway.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return {"GANGWAY_CONFIG": str(cfg), "DOCKER_CONFIG": str(tmp_path), "GANGWAY_MLFLOW_URL": ""}


@pytest.fixture
def loopback_registry(tmp_path: Path) -> Iterator[tuple[FakeRegistry, dict[str, str]]]:
    """A registry on 127.0.0.1 holding gangway/runtime:v1 and :v2, and the env that makes it
    the pipelines' image."""
    reg = runtime_registry()
    reg.manifests[("gangway/runtime", "v2")] = V2
    with serve(reg) as host:
        yield reg, _registry_env(tmp_path, host)


def _objects(stdout: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The WorkflowTemplate of a dry run, and the parameters of its Workflow."""
    wt, wf = [d for d in yaml.safe_load_all(stdout) if d]
    return wt, {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}


def test_submit_pins_the_image_by_digest(
    loopback_registry: tuple[FakeRegistry, dict[str, str]],
) -> None:
    reg, env = loopback_registry
    res = _gangway("submit", PIPE, "--dry-run", "--pin-image", env=env)
    assert res.returncode == 0, res.stderr
    wt, params = _objects(res.stdout)
    assert params["image"] == f"{reg.host}/gangway/runtime:v1@{DIGEST}"
    # the template keeps the tag: deploying it again after a push changes nothing
    defaults = {p["name"]: p["value"] for p in wt["spec"]["arguments"]["parameters"]}
    assert defaults["image"] == f"{reg.host}/gangway/runtime:v1"
    res = _gangway(
        "submit", PIPE, "--dry-run", "--pin-image", "-p", f"image={reg.host}/gangway/runtime:v2",
        env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    v2 = "sha256:" + hashlib.sha256(V2).hexdigest()
    assert _objects(res.stdout)[1]["image"] == f"{reg.host}/gangway/runtime:v2@{v2}"


def test_submit_of_a_tag_the_registry_does_not_have_prints_nothing(
    loopback_registry: tuple[FakeRegistry, dict[str, str]],
) -> None:
    reg, env = loopback_registry
    res = _gangway(
        "submit", PIPE, "--dry-run", "--pin-image", "-p", f"image={reg.host}/gangway/runtime:v9",
        env=env,
    )  # fmt: skip
    assert res.returncode == 1 and res.stdout == ""
    assert "gangway/runtime:v9 not found; push the image first" in res.stderr
    assert "Traceback" not in res.stderr


def test_no_pin_image_sends_the_tag_and_says_so(
    loopback_registry: tuple[FakeRegistry, dict[str, str]],
) -> None:
    reg, env = loopback_registry
    res = _gangway("submit", PIPE, "--dry-run", "--no-pin-image", env=env)
    assert res.returncode == 0, res.stderr
    assert "image" not in _objects(res.stdout)[1]
    assert "dry run: the image goes by its tag" in res.stderr
    assert reg.seen == []  # the registry was not asked


def test_a_dry_run_makes_no_network_call_unless_asked(
    loopback_registry: tuple[FakeRegistry, dict[str, str]],
) -> None:
    """Neither the registry nor MLflow is asked (both on the one loopback server here); the
    dry run says what it skipped and how to ask for it."""
    reg, env = loopback_registry
    env = {**env, "GANGWAY_MLFLOW_URL": f"http://{reg.host}"}
    submit = _gangway("submit", PIPE, "--dry-run", env=env)
    deploy = _gangway("deploy", PIPE, "--dry-run", env=env)
    for res in (submit, deploy):
        assert res.returncode == 0, res.stderr
        assert "the MLflow link is left out" in res.stderr and "--check-links" in res.stderr
    assert "registry not asked for its digest (--pin-image asks it" in submit.stderr
    assert "image" not in _objects(submit.stdout)[1]
    assert reg.seen == []


def test_an_unreachable_registry_warns_a_dry_run_and_stops_a_submit(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{s.getsockname()[1]}"
    env = _registry_env(tmp_path, host)
    dry = _gangway("submit", PIPE, "--dry-run", "--pin-image", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "image not pinned in this dry run" in dry.stderr and "unreachable" in dry.stderr
    assert "image" not in _objects(dry.stdout)[1]
    real = _gangway("submit", PIPE, env={**env, "ARGO_SERVER": f"http://{host}"})
    assert real.returncode == 75, real.stderr  # transient: try again
    assert f"registry {host} unreachable" in real.stderr and "nothing was sent" in real.stderr
    assert "Traceback" not in real.stderr


def test_the_workflow_sent_and_its_lineage_carry_the_pinned_image(
    loopback_registry: tuple[FakeRegistry, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reg, env = loopback_registry
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    argo = InMemoryArgo()
    cluster = ClusterConfig(name="env", argo_server="http://argo.test")
    monkeypatch.setattr(cluster_cmds, "_connect", lambda name: (cluster, argo))
    image = f"{reg.host}/gangway/runtime:v1"
    cluster_cmds.submit_cmd(REPO / PIPE, param=[f"image={image}"])
    (wf,) = [o for (kind, _), o in argo.objects.items() if kind == "Workflow"]
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert params["image"] == f"{image}@{DIGEST}"
    # every container step gets the parameter as GANGWAY_IMAGE, which the lineage records
    wt = argo.objects[("WorkflowTemplate", wf["spec"]["workflowTemplateRef"]["name"])]
    var = WORKFLOW_IDENTITY_ENV["image"]
    values = {
        e["value"]
        for t in wt["spec"]["templates"]
        for e in (t.get("container") or {}).get("env") or []
        if e["name"] == var
    }
    assert values == {"{{workflow.parameters.image}}"}
    assert workflow_from_env({var: params["image"]}).image == f"{image}@{DIGEST}"


@pytest.mark.on_cluster
def test_submit_reference_pipeline_to_a_real_cluster() -> None:
    if not (os.environ.get("ARGO_SERVER") and os.environ.get("KUBECONFIG")):
        pytest.skip(
            "no cluster configured: set KUBECONFIG and ARGO_SERVER (Argo + Volcano) "
            "to run the on_cluster tier"
        )
    from gangway.cluster.submission import HeraArgoApi

    res = _gangway(
        "submit", "pipelines/train_eval_infer.py", "-p", "train-steps=20", env=dict(os.environ)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    name = res.stdout.split("submitted workflow ")[1].split()[0]
    c = resolve_cluster(None)
    api = HeraArgoApi(c.base_url, c.token, c.verify_ssl)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        wf = api.get("Workflow", name, c.namespace)
        if wf and (wf.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Error"):
            break
        time.sleep(10)
    assert wf is not None and wf["status"]["phase"] == "Succeeded", wf
