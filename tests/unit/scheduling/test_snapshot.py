"""Snapshots: the shipped example, files with mistakes, recorded API objects, and "why"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangway.config import EXAMPLE, load_config
from gangway.errors import PermanentError
from gangway.scheduling.admission import Verdict
from gangway.scheduling.pending import why_pending
from gangway.scheduling.snapshot import EXAMPLE_SNAPSHOT, dump_snapshot, load_snapshot
from gangway.scheduling.snapshot.example import example_snapshot
from gangway.scheduling.snapshot.live import live_snapshot
from gangway.scheduling.snapshot.objects import cluster_from_objects
from tests.helpers import REPO

DATA = REPO / "tests" / "data"
RECORDED = DATA / "cluster-objects.yaml"


def _objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(RECORDED.read_text())["items"]
    return items


def test_the_shipped_example_is_what_the_code_makes() -> None:
    """Golden: regenerate with GANGWAY_UPDATE_GOLDEN=1 after an intended change."""
    text = dump_snapshot(example_snapshot())
    head = "".join(
        line for line in EXAMPLE_SNAPSHOT.read_text().splitlines(True) if line.startswith("#")
    )
    if os.environ.get("GANGWAY_UPDATE_GOLDEN") == "1" and not os.environ.get("CI"):
        EXAMPLE_SNAPSHOT.write_text(head + text)
    assert EXAMPLE_SNAPSHOT.read_text() == head + text
    assert load_snapshot(EXAMPLE_SNAPSHOT) == example_snapshot()


def test_the_example_matches_the_example_config() -> None:
    cfg = load_config(EXAMPLE)
    snap = load_snapshot(EXAMPLE_SNAPSHOT)
    assert set(snap.clusters) == set(cfg.clusters)
    for name, c in snap.clusters.items():
        gpus: dict[str, int] = {}
        for n in c.nodes:
            gpus[str(n.gpu_type)] = gpus.get(str(n.gpu_type), 0) + n.allocatable.gpus
        assert gpus == cfg.clusters[name].gpus, name
        assert {v.queue for v in cfg.team_views().values()} <= set(c.queues)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][0].update(queue="nope"),
            "clusters.us-east.gangs[0].queue: no queue 'nope' in this cluster",
            id="gang-in-an-unknown-queue",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][0]["placement"].update({"ghost": 1}),
            "no node 'ghost'",
            id="gang-on-an-unknown-node",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0]["allocatable"].update(cpu="lots"),
            "clusters.us-east.nodes.0.allocatable.cpu",
            id="cpu-not-a-quantity",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["queues"]["research"]["capability"].update(
                {"gpus": 3}
            ),
            "unknown resource 'gpus': use cpu, memory, gpu or gpu/TYPE",
            id="quota-key-misspelt",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0].update(domains={"row": "r1"}),
            "tier(s) row not in tiers",
            id="domain-of-an-unknown-tier",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0]["allocated"].update(gpus=0),
            "less than its gangs' pods hold",
            id="node-holds-less-than-its-gangs",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][7].update(allocated={"gpus": 16}),
            "clusters.us-east.nodes[7].allocated: more than its allocatable",
            id="node-allocated-beyond-allocatable",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["queues"]["frontier"].update(parent="research"),
            "clusters.us-east.queues.frontier.parent: 'research' is below it (a cycle)",
            id="queue-parent-cycle",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0]["allocatable"].update(gpus=True),
            "clusters.us-east.nodes.0.allocatable.gpus",
            id="gpus-a-boolean",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0]["allocatable"].update(
                memory=float("inf")
            ),
            "clusters.us-east.nodes.0.allocatable.memory",
            id="memory-infinite",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0]["allocatable"].update(memory="1e30"),
            "larger than any real amount",
            id="memory-absurd",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][0].update(
                last_checkpoint_at="2027-01-01T00:00:00Z"
            ),
            "gangs[0].last_checkpoint_at: after the snapshot was taken",
            id="checkpoint-in-the-future",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][3].update(gpu_type="H100"),
            "has A100 GPUs, not H100",
            id="gang-on-nodes-of-another-model",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][0].update(phase="Pending"),
            "a pending gang holds no nodes",
            id="pending-gang-holding-nodes",
        ),
        pytest.param(
            lambda d: d["teams"]["research"].update(queue="research-x"),
            "teams.research.queue: no queue 'research-x' in any cluster",
            id="team-queue-nowhere",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["queues"]["evals"]["guarantee"].update(
                {"gpu/H100": 99}
            ),
            "guarantee.gpu/H100: 99 is over its capability 16",
            id="guarantee-over-capability",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["gangs"][1].update(name="pretrain-7b"),
            "gangs: named twice: default/pretrain-7b",
            id="gang-twice",
        ),
        pytest.param(
            lambda d: d["teams"]["research"].update(priority_classes=[]),
            "teams.research.priority_classes",
            id="team-without-classes",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["queues"]["research"]["capability"].update(cpu="-5"),
            "cpu: '-5' is negative",
            id="negative-quota",
        ),
        pytest.param(
            lambda d: d["clusters"]["us-east"]["nodes"][0].update(gpu_type=""),
            "clusters.us-east.nodes.0.gpu_type",
            id="empty-gpu-model",
        ),
    ],
)
def test_a_bad_snapshot_file_names_every_field(tmp_path: Path, edit: Any, says: str) -> None:
    doc = yaml.safe_load(EXAMPLE_SNAPSHOT.read_text())
    edit(doc)
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(PermanentError) as e:
        load_snapshot(path)
    assert says in str(e.value) and str(path) in str(e.value)


def test_a_time_without_a_zone_is_utc(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE_SNAPSHOT.read_text())
    doc["taken_at"] = "2026-12-01 12:00:00"
    doc["clusters"]["us-east"]["gangs"][0]["started_at"] = "2026-12-01 06:00:00"
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc))
    snap = load_snapshot(p)
    assert snap.taken_at.utcoffset() is not None
    gang = snap.clusters["us-east"].gangs[0]
    assert gang.started_at is not None and gang.started_at.utcoffset() is not None


def test_unreadable_snapshot_files_are_one_line_errors(tmp_path: Path) -> None:
    for content, says in [
        (b"- a\n- b\n", "expected a mapping"),
        (b"a: [\n", "not valid YAML"),
        (b"\xff\xfe", "not UTF-8"),
        (b"a: 1\na: 2\n", "given twice"),
        (b"? [a, b]\n: 1\n", "not valid YAML"),
    ]:
        p = tmp_path / "s.yaml"
        p.write_bytes(content)
        with pytest.raises(PermanentError, match=says):
            load_snapshot(p)
    with pytest.raises(PermanentError, match="cannot read it"):
        load_snapshot(tmp_path / "missing.yaml")


def test_recorded_volcano_objects_match_the_crds() -> None:
    from gangway.lint import CrdSchemas

    schemas = CrdSchemas.from_env()
    if schemas is None:
        pytest.skip("set GANGWAY_CRDS_DIR to the upstream CRDs")
    checked = 0
    for obj in _objects():
        v = schemas.validator(obj["apiVersion"], obj["kind"])
        if v is None:
            continue
        errors = [e.message for e in v.iter_errors(obj)]
        assert not errors, (obj["kind"], obj["metadata"]["name"], errors)
        checked += 1
    assert checked == 11  # 3 HyperNodes, 4 Queues, 3 PodGroups, 1 Job


def test_recorded_core_objects_are_valid_kubernetes() -> None:
    import kubernetes_validate

    for obj in _objects():
        if obj["apiVersion"] in ("v1", "scheduling.k8s.io/v1"):
            kubernetes_validate.validate(obj, "1.32", strict=True)


def _recorded_cluster() -> Any:
    cfg = load_config(EXAMPLE)
    c = cfg.clusters["eu-west"]
    return cluster_from_objects(
        _objects(), region=c.region, gpu_products=c.gpu_products, topology_labels={}
    )


def test_a_snapshot_from_recorded_objects() -> None:
    state = _recorded_cluster()
    nodes = {n.name: n for n in state.nodes}
    assert state.tiers == ["tier1", "tier2"]
    assert nodes["eu-gpu-01"].domains == {"tier1": "eu-rack-a", "tier2": "eu-spine"}
    assert nodes["eu-gpu-01"].gpu_type == "A100" and nodes["eu-gpu-05"].gpu_type == "L4"
    assert not nodes["eu-gpu-06"].schedulable
    assert nodes["eu-gpu-01"].allocated.gpus == 4
    assert nodes["eu-gpu-02"].allocated.cpu == 1000  # the Argo step; the finished pod is gone
    assert nodes["eu-gpu-01"].allocatable.memory == 1056763028 * 1024
    gangs = {g.name.split("-")[0] + "-" + g.name.split("-")[1]: g for g in state.gangs}
    ft, train = gangs["wf-ft"], gangs["wf-abc"]
    assert ft.phase == "Running" and ft.placement == {"eu-gpu-01": 1} and ft.priority == 1000
    assert ft.gpu_type == "A100" and ft.workflow == "wf-ft"
    assert train.phase == "Pending" and train.pods == 2 and train.priority == 10000
    assert state.queues["research"].parent == "frontier"
    assert state.queues["research"].deserved["gpu"] == 64
    assert state.queues["root"].parent is None


def test_why_a_pending_gang_waits_says_volcano_and_gangway() -> None:
    snap = example_snapshot()
    snap = snap.model_copy(update={"clusters": {**snap.clusters, "eu-west": _recorded_cluster()}})
    (g,) = why_pending("wf-abc", _objects(), snap, cluster="eu-west")
    assert g.job == "wf-abc-train-7qv4d" and g.phase == "Pending"
    assert g.conditions[0].reason == "NotEnoughResources"
    assert g.placement is not None
    d = g.placement.decision
    # It needs both A100 nodes; a lower-priority fine-tune of its own queue holds one.
    assert d.workload.gpu_type == "A100" and d.workload.pods == 2
    assert d.verdict == Verdict.PREEMPT
    plan = g.placement.options[0].decision.preemption
    assert plan is not None and [v.gang.workflow for v in plan.victims] == ["wf-ft"]
    # The pending gang is not counted as queued ahead of itself.
    assert not any("pending" in n for o in g.placement.options for n in o.notes)
    assert why_pending("wf-other", _objects(), snap, cluster="eu-west") == []


def test_live_snapshot_reads_every_cluster_and_leaves_out_an_unreachable_one() -> None:
    cfg = load_config(EXAMPLE)
    warnings: list[str] = []

    def lister(context: str | None) -> list[dict[str, Any]]:
        if context == "gangway-us-east":
            raise PermanentError("cannot load kube context gangway-us-east")
        return _objects()

    snap = live_snapshot(cfg, lister=lister, warn=warnings.append)
    assert set(snap.clusters) == {"eu-west"} and snap.source == "live"
    assert "us-east: left out" in warnings[0]
    research = snap.clusters["eu-west"].queues["research"]
    assert research.capability["gpu/A100"] == 32  # from the config: Volcano has no models
    assert research.capability["gpu"] == 96  # from the Queue: the live value wins
    assert snap.teams["research"].priority_classes == ["gangway-normal", "gangway-batch"]
    with pytest.raises(PermanentError, match="no cluster could be read; pass --snapshot"):
        live_snapshot(cfg, lister=lambda _c: (_ for _ in ()).throw(PermanentError("x")))


def test_a_saved_snapshot_reads_back_the_same(tmp_path: Path) -> None:
    snap = example_snapshot()
    p = tmp_path / "s.yaml"
    p.write_text(dump_snapshot(snap))
    assert load_snapshot(p) == snap


@pytest.mark.on_cluster
def test_a_live_snapshot_of_a_real_cluster_loads_back() -> None:
    """With a kube context holding Volcano (its CRDs installed), the live reader's snapshot is
    consistent and round-trips through a file."""
    context = os.environ.get("GANGWAY_KUBE_CONTEXT")
    if not (context and os.environ.get("KUBECONFIG")):
        pytest.skip(
            "no cluster configured: set KUBECONFIG and GANGWAY_KUBE_CONTEXT (a cluster with "
            "Volcano) to run the on_cluster tier"
        )
    from gangway.scheduling.snapshot.checks import problems
    from gangway.scheduling.snapshot.live import list_objects

    objs = list_objects(context)
    state = cluster_from_objects(objs, region="live")
    assert state.nodes, "the cluster has no nodes?"
    cfg = load_config(EXAMPLE)
    snap = live_snapshot(cfg, clusters=["us-east"], lister=lambda _c: objs)
    assert problems(snap) == []
    assert load_snapshot_text(dump_snapshot(snap)) == snap


def load_snapshot_text(text: str) -> Any:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    return load_snapshot(Path(f.name))


def test_checkpoint_times_from_lineage_go_onto_their_gangs() -> None:
    from datetime import UTC, datetime

    from gangway.scheduling.snapshot import with_checkpoints

    state = _recorded_cluster()
    snap = example_snapshot().model_copy(update={"clusters": {"eu-west": state}})
    when = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
    marked = with_checkpoints(snap, {"wf-ft": when, "elsewhere": when})
    times = {g.workflow: g.last_checkpoint_at for g in marked.clusters["eu-west"].gangs}
    assert times["wf-ft"] == when and times["wf-abc"] is None
