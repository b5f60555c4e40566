"""Karpenter from the platform config (docs/capacity.md): the ``provisioning:`` block is checked
with field paths; each cluster that has one gets an EC2NodeClass and a NodePool per GPU model ×
capacity type whose GPU limit is no lower than the quotas on the model plus the headroom;
the objects pass the Karpenter v1.14.1 CRDs' schemas and their CEL rules."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from gangway.config import EXAMPLE, PlatformConfig, load_config
from gangway.config.provisioning import required_gpus
from gangway.errors import PermanentError
from gangway.lint.crds import CrdSchemas
from gangway.lint.structural import validate_structure
from gangway.render import render
from gangway.render.karpenter import karpenter_objects
from gangway.units import GPU_PRODUCT_LABEL, GPU_TAINT

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]
PROV = "clusters.us-east.provisioning"


def _example() -> Obj:
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(raw, dict)
    return raw


def _prov(raw: Obj) -> Obj:
    prov = raw["clusters"]["us-east"]["provisioning"]
    assert isinstance(prov, dict)
    return prov


def _load(tmp_path: Path, mutate: Mutation) -> PlatformConfig:
    raw = copy.deepcopy(_example())
    mutate(raw)
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def _refused(tmp_path: Path, mutate: Mutation) -> str:
    with pytest.raises(PermanentError) as e:
        _load(tmp_path, mutate)
    return str(e.value)


def _pools(cfg: PlatformConfig, cluster: str = "us-east") -> list[Obj]:
    return [o for o in karpenter_objects(cfg, cluster) if o["kind"] == "NodePool"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(
            lambda raw: _prov(raw).update(provider="gcp"),
            f"{PROV}.provider: Value error, 'gcp': Gangway renders Karpenter's node classes "
            "for aws only",
            id="provider-not-aws",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"].update(node_class="nope"),
            f"{PROV}.gpus.H100.node_class: no node class 'nope' (gpu-training)",
            id="unknown-node-class",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"].update(max_gpus=56),
            f"{PROV}.gpus.H100.max_gpus: 56 is below what the quotas grant on H100 (56) plus "
            "10% headroom (62): raise it to 62 or more",
            id="limit-below-quota-plus-headroom",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"].update(capacity_types=["reserved"]),
            f"{PROV}.gpus.H100.capacity_types: reserved: node class 'gpu-training' names no "
            "capacity_reservation_ids",
            id="reserved-without-reservations",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"].update(capacity_types=["preemptible"]),
            f"{PROV}.gpus.H100.capacity_types.0: Input should be 'reserved', 'on-demand' or 'spot'",
            id="unknown-capacity-type",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"].update(instance_families=["p5"]),
            f"{PROV}.gpus.H100: Value error, give instance_types (e.g. [p5.48xlarge]) or "
            "instance_families",
            id="types-and-families",
        ),
        pytest.param(
            lambda raw: _prov(raw)["node_classes"]["gpu-training"].update(ami="bottlerocket@1"),
            f"{PROV}.node_classes.gpu-training.ami: Value error, 'bottlerocket@1': give an "
            "Amazon Linux 2023 alias",
            id="ami-not-al2023",
        ),
        pytest.param(
            lambda raw: _prov(raw)["node_classes"]["gpu-training"].update(subnet_tags={}),
            f"{PROV}.node_classes.gpu-training.subnet_tags: Dictionary should have at least 1 item",
            id="no-subnets",
        ),
        pytest.param(
            lambda raw: _prov(raw)["node_classes"]["gpu-training"]["tags"].update(
                {"karpenter.sh/nodepool": "x"}
            ),
            f"{PROV}.node_classes.gpu-training.tags: Value error, karpenter.sh/nodepool: "
            "Karpenter or EKS sets these tags",
            id="reserved-tag",
        ),
        pytest.param(
            lambda raw: _prov(raw)["gpus"]["H100"]["node"].update(memory="lots"),
            f"{PROV}.gpus.H100.node.memory: Value error",
            id="node-memory-not-a-quantity",
        ),
        pytest.param(
            lambda raw: _prov(raw)["disruption"].update(consolidate_after="soon"),
            f"{PROV}.disruption.consolidate_after: String should match pattern",
            id="duration",
        ),
        pytest.param(
            lambda raw: raw["teams"]["platform"]["deserved"]["gpu"].update(B200=8),
            "teams.platform.deserved.gpu.B200: no cluster has or provisions B200 GPUs",
            id="quota-model-not-provisionable",
        ),
    ],
)
def test_each_provisioning_mistake_is_named_with_its_field_path(
    tmp_path: Path, mutate: Mutation, expected: str
) -> None:
    assert expected in _refused(tmp_path, mutate)


def test_a_model_only_provisioned_is_one_a_quota_may_name(tmp_path: Path) -> None:
    def b200(raw: Obj) -> None:
        h100 = copy.deepcopy(_prov(raw)["gpus"]["H100"])
        _prov(raw)["gpus"]["B200"] = {**h100, "instance_types": ["p6-b200.48xlarge"]}
        raw["teams"]["platform"]["deserved"]["gpu"]["B200"] = 8
        raw["teams"]["platform"]["capability"]["gpu"]["B200"] = 8

    cfg = _load(tmp_path, b200)
    assert "B200" not in cfg.gpu_types()
    assert {p["metadata"]["name"] for p in _pools(cfg)} >= {
        "gangway-b200-on-demand",
        "gangway-b200-spot",
    }


def test_a_nodepool_per_gpu_model_and_capacity_type_weighted_reserved_on_demand_spot(
    tmp_path: Path,
) -> None:
    def reserved(raw: Obj) -> None:
        _prov(raw)["node_classes"]["gpu-training"]["capacity_reservation_ids"] = ["cr-0abc"]
        _prov(raw)["gpus"]["H100"]["capacity_types"] = ["spot", "reserved", "on-demand"]

    pools = _pools(_load(tmp_path, reserved))
    assert [(p["metadata"]["name"], p["spec"]["weight"]) for p in pools] == [
        ("gangway-a100-on-demand", 20),
        ("gangway-h100-reserved", 30),
        ("gangway-h100-on-demand", 20),
        ("gangway-h100-spot", 10),
    ]


def _requirement(pool: Obj, key: str) -> list[str]:
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    found = [r["values"] for r in reqs if r["key"] == key and r["operator"] == "In"]
    assert len(found) == 1, (key, reqs)
    return list(found[0])


def test_nodepools_launch_what_gangway_gpu_pods_select_and_tolerate() -> None:
    cfg = load_config(EXAMPLE)
    cluster = cfg.clusters["us-east"]
    for pool in _pools(cfg):
        model = pool["metadata"]["labels"]["gangway.dev/gpu-model"]
        product = cluster.gpu_products[model]
        template = pool["spec"]["template"]
        assert template["metadata"]["labels"][GPU_PRODUCT_LABEL] == product
        assert _requirement(pool, GPU_PRODUCT_LABEL) == [product]
        ct = pool["metadata"]["name"].removeprefix(f"gangway-{model.lower()}-")
        assert _requirement(pool, "karpenter.sh/capacity-type") == [ct]
        assert _requirement(pool, "node.kubernetes.io/instance-type") == (
            cluster.provisioning.gpus[model].instance_types if cluster.provisioning else []
        )
        assert template["spec"]["taints"] == [{"key": GPU_TAINT, "effect": "NoSchedule"}]
        disruption = pool["spec"]["disruption"]
        assert disruption["consolidationPolicy"] == "WhenEmpty"
        assert disruption["consolidateAfter"] == "30m"
        assert disruption["budgets"] == [{"nodes": "1"}]
        assert template["spec"]["expireAfter"] == "720h"
        assert template["spec"]["terminationGracePeriod"] == "24h"


@pytest.mark.parametrize("headroom", [0, 10, 50])
@pytest.mark.parametrize("research_h100", [48, 60, 64])
def test_gpu_limits_follow_the_quotas_plus_the_headroom(
    tmp_path: Path, headroom: int, research_h100: int
) -> None:
    def quotas(raw: Obj) -> None:
        _prov(raw)["headroom_percent"] = headroom
        frontier = raw["orgs"]["frontier"]
        frontier["deserved"]["gpu"]["H100"] = research_h100 + 8
        frontier["capability"]["gpu"]["H100"] = research_h100 + 8
        frontier["teams"]["research"]["deserved"]["gpu"]["H100"] = research_h100
        frontier["teams"]["research"]["capability"]["gpu"]["H100"] = research_h100

    cfg = _load(tmp_path, quotas)
    granted = cfg.granted_gpus()
    assert granted["H100"] == research_h100 + 8  # research's and evals' deserved shares
    for pool in _pools(cfg):
        model = pool["metadata"]["labels"]["gangway.dev/gpu-model"]
        gpus = int(pool["spec"]["limits"]["nvidia.com/gpu"])
        need = required_gpus(granted[model], headroom)
        assert need <= gpus < need + 8  # whole nodes of 8 GPUs
        assert gpus % 8 == 0
        shape = cfg.clusters["us-east"].provisioning.gpus[model].node  # type: ignore[union-attr]
        assert pool["spec"]["limits"]["cpu"] == str(gpus // 8 * int(shape.cpu))
        assert pool["spec"]["limits"]["memory"] == f"{gpus // 8 * int(shape.memory[:-2])}Gi"


def test_a_stated_limit_at_or_above_the_quotas_is_kept(tmp_path: Path) -> None:
    cfg = _load(tmp_path, lambda raw: _prov(raw)["gpus"]["H100"].update(max_gpus=62))
    limits = {p["metadata"]["name"]: p["spec"]["limits"] for p in _pools(cfg)}
    assert limits["gangway-h100-on-demand"]["nvidia.com/gpu"] == "62"
    assert limits["gangway-h100-spot"]["cpu"] == str(8 * 192)  # 62 GPUs: 8 nodes


def test_only_a_cluster_with_provisioning_gets_karpenter_yaml() -> None:
    files = render(load_config(EXAMPLE))
    assert (
        "karpenter.yaml"
        in yaml.safe_load(files["overlays/us-east/kustomization.yaml"])["resources"]
    )
    assert "overlays/eu-west/karpenter.yaml" not in files
    assert "karpenter" not in files["overlays/eu-west/kustomization.yaml"]
    assert (
        render(load_config(EXAMPLE))["overlays/us-east/karpenter.yaml"]
        == (files["overlays/us-east/karpenter.yaml"])
    )


def _objects() -> list[Obj]:
    return karpenter_objects(load_config(EXAMPLE), "us-east")


def test_the_objects_pass_the_karpenter_crds_schemas(schemas: CrdSchemas) -> None:
    kinds = {(o["apiVersion"], o["kind"]) for o in _objects()}
    assert kinds == {("karpenter.sh/v1", "NodePool"), ("karpenter.k8s.aws/v1", "EC2NodeClass")}
    for api_version, kind in kinds:
        assert schemas.get(api_version, kind) is not None, f"no CRD for {kind} in the schemas"
    for obj in _objects():
        assert validate_structure(obj, schemas, obj["kind"]) == []
    broken = copy.deepcopy(_objects()[-1])
    broken["spec"]["disruption"]["consolidationPolicy"] = "WhenIdle"
    assert validate_structure(broken, schemas, "NodePool")


# The CRDs' CEL rules (x-kubernetes-validations), which the linter's JSON Schema leaves out:
# evaluated here on every rendered object with cel-python, plus the two string functions of
# Kubernetes' CEL library the Karpenter rules use.


def _crd_schema(kind: str) -> Obj:
    import os

    root = Path(os.environ.get("GANGWAY_CRDS_DIR", "")) / "karpenter-v1.14.1"
    if not root.is_dir():
        pytest.skip("GANGWAY_CRDS_DIR has no karpenter-v1.14.1/")
    for path in sorted(root.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            assert isinstance(schema, dict)
            return schema
    raise AssertionError(f"no CRD for {kind}")


def _find(s: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    m = re.search(str(pattern), str(s))
    return celtypes.StringType(m.group(0) if m else "")


def _split(s: celtypes.StringType, sep: celtypes.StringType) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(p) for p in str(s).split(str(sep))])


_ENV = celpy.Environment()


@cache
def _program(rule: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(rule), functions={"find": _find, "split": _split})


def _rules(schema: Mapping[str, Any], value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """``(path, rule, value)`` for each CEL rule that applies to ``value`` or below."""
    for v in schema.get("x-kubernetes-validations") or []:
        yield path, v["rule"], value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, child in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            if sub:
                yield from _rules(sub, child, f"{path}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _rules(schema["items"], item, f"{path}[{i}]")


def test_the_objects_pass_the_karpenter_crds_cel_rules() -> None:
    checked = 0
    for obj in _objects():
        for path, rule, value in _rules(_crd_schema(obj["kind"]), obj, obj["kind"]):
            if "oldSelf" in rule:
                continue  # a transition rule: there is no earlier object
            result = _program(rule).evaluate({"self": json_to_cel(value)})
            if isinstance(result, CELEvalError):
                raise AssertionError(f"{path}: {rule}: {result}")
            assert result is celtypes.BoolType(True) or bool(result), f"{path}: fails {rule}"
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        pytest.param(
            lambda o: o["spec"]["template"]["spec"]["requirements"].append(
                {"key": "karpenter.k8s.aws/instance-type", "operator": "In", "values": ["x"]}
            ),
            "NodePool",
            id="restricted-label-domain",
        ),
        pytest.param(
            lambda o: o["spec"].update(instanceProfile="p"), "EC2NodeClass", id="role-and-profile"
        ),
        pytest.param(
            lambda o: o["spec"].update(amiFamily="AL2"), "EC2NodeClass", id="family-not-alias"
        ),
    ],
)
def test_the_cel_check_catches_what_karpenter_would_refuse(
    change: Callable[[Obj], None], kind: str
) -> None:
    obj = copy.deepcopy(next(o for o in _objects() if o["kind"] == kind))
    change(obj)
    failures = [
        rule
        for _path, rule, value in _rules(_crd_schema(kind), obj, kind)
        if "oldSelf" not in rule and not bool(_program(rule).evaluate({"self": json_to_cel(value)}))
    ]
    assert failures
