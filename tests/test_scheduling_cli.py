"""``gangway explain``, ``queues``, ``snapshot``, ``why`` and ``submit --cluster auto`` as a
user meets them, over the shipped example snapshot (no cluster here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.test_cli import gangway

PIPE = "pipelines/train_eval_infer.py"
GPUS = ("-p", "nodes=2", "-p", "gpus-per-node=8")


def test_explain_prints_the_decision_and_the_ranked_clusters() -> None:
    res = gangway("explain", PIPE, *GPUS, "--snapshot", "example", "--gpu-type", "H100")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "train: admit" in out and "clusters, best first" in out
    assert "1. us-east: fits now" in out and "2. eu-west: no H100 nodes in eu-west" in out
    assert "on nodes of NVIDIA-H100-80GB-HBM3" in out


def test_explain_a_gang_that_waits_shows_the_evictions_volcano_would_make() -> None:
    res = gangway(
        "explain", PIPE, "-p", "nodes=3", "-p", "gpus-per-node=8", "--snapshot", "example",
        "--gpu-type", "H100", "-p", "priority-class=gangway-normal",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "train: preempt" in res.stdout
    assert "would evict on us-east" in res.stdout and "sweep-lr-3" in res.stdout
    assert "preempt: same queue, priority 1000 < 10000" in res.stdout
    # One node more than that, and the queue's capability is the limit: it waits, saying so.
    more = gangway("explain", PIPE, "-p", "nodes=4", "-p", "gpus-per-node=8", "--snapshot",
                   "example", "--gpu-type", "H100")  # fmt: skip
    assert "train: wait" in more.stdout
    assert "queue research holds 40 of its 64 gpu/H100 capability" in more.stdout
    assert "once admitted, on us-east" in more.stdout


def test_explain_rejects_with_the_field_to_change() -> None:
    res = gangway(
        "explain", PIPE, "-p", "nodes=40", "-p", "gpus-per-node=8", "--snapshot", "example",
        "--gpu-type", "B200",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "train: reject" in res.stdout and "--gpu-type: no B200 GPUs in any cluster" in res.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-p", "nodez=2"], "nodez"),
        (["--snapshot", "missing.yaml"], "missing.yaml: cannot read it"),
        (["--cluster", "mars"], "--cluster mars: not in the snapshot (eu-west, us-east)"),
    ],
    ids=["unknown-parameter", "missing-snapshot-file", "unknown-cluster"],
)
def test_explain_mistakes_are_one_line_errors(args: list[str], says: str) -> None:
    base = ["explain", PIPE, *GPUS, "--snapshot", "example"]
    res = gangway(*base, *args)
    assert res.returncode == 1, res.stdout
    assert says in res.stderr and "Traceback" not in res.stderr


def test_explain_a_bad_topology_tier_names_the_option() -> None:
    res = gangway("explain", PIPE, *GPUS, "--snapshot", "example", "--within", "row")
    assert res.returncode == 0, res.stderr
    assert "--within: no topology tier 'row' (block, rack, tier1, tier2)" in res.stdout


def test_queues_shows_usage_against_quota() -> None:
    res = gangway("queues", "--snapshot", "example", "--cluster", "us-east")
    assert res.returncode == 0, res.stderr
    assert "us-east (us-east-1): queues" in res.stdout and "research" in res.stdout
    assert "gpu/H100" in res.stdout and "eu-west" not in res.stdout
    bad = gangway("queues", "--snapshot", "example", "--cluster", "mars")
    assert bad.returncode == 1 and "--cluster mars: not in the snapshot" in bad.stderr


def test_snapshot_show_and_a_live_read_without_a_cluster() -> None:
    res = gangway("snapshot", "show", "--snapshot", "example")
    assert res.returncode == 0 and "us-east" in res.stdout and "16 / 64" in res.stdout
    # No kube contexts here: every cluster is left out with the reason, then one clear error.
    live = gangway("snapshot", "save", "-o", "/tmp/never-written.yaml")
    assert live.returncode in (1, 75), live.stderr
    assert "no cluster could be read; pass --snapshot" in live.stderr
    assert "Traceback" not in live.stderr and not Path("/tmp/never-written.yaml").exists()


def test_why_needs_a_cluster_or_a_snapshot() -> None:
    res = gangway("why", "wf-abc", env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "ARGO_SERVER" in res.stderr or "--cluster NAME" in res.stderr


def test_submit_cluster_auto_dry_run_places_the_gang(tmp_path: Path) -> None:
    res = gangway(
        "submit", PIPE, *GPUS, "--cluster", "auto", "--dry-run", "--snapshot", "example",
        "--gpu-type", "H100", "--within", "rack",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "--cluster auto: us-east" in res.stderr
    docs = list(yaml.safe_load_all(res.stdout))
    template = next(d for d in docs if d["kind"] == "WorkflowTemplate")
    job_text = next(t for t in template["spec"]["templates"] if t.get("resource"))["resource"][
        "manifest"
    ]
    assert "highestTierAllowed: 1" in job_text and "mode: hard" in job_text
    assert "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3" in job_text
    run = next(d for d in docs if d["kind"] == "Workflow")
    params = {p["name"]: p["value"] for p in run["spec"]["arguments"]["parameters"]}
    assert params["cluster"] == "us-east"
    assert params["storage-root"] == "s3://gangway-artifacts-us-east-1"


def test_submit_cluster_auto_sends_nothing_when_no_cluster_can_ever_run_it() -> None:
    res = gangway(
        "submit", PIPE, "-p", "nodes=40", "-p", "gpus-per-node=8", "--cluster", "auto",
        "--dry-run", "--snapshot", "example", "--gpu-type", "H100",
    )  # fmt: skip
    assert res.returncode == 1
    assert "no cluster can ever run this; nothing was sent" in res.stderr
    assert res.stdout == ""


def test_placement_options_need_cluster_auto() -> None:
    res = gangway("submit", PIPE, "--dry-run", "--gpu-type", "H100")
    assert res.returncode == 1 and "go with --cluster auto" in res.stderr
