"""``gangway explain``, ``queues``, ``snapshot``, ``why`` and ``submit --cluster auto`` as a
user meets them, over the shipped example snapshot (no cluster here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, gangway

PIPE = "pipelines/train_eval_infer_gpu.py"
CPU_PIPE = "pipelines/train_eval_infer.py"
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
    # research holds 40 of its 64 H100; its parent frontier 48 of 64: the larger shortfall.
    assert "queue frontier holds 48 H100 GPUs of its capability of 64 H100 GPUs" in more.stdout
    assert "waits for 16 H100 GPUs to be released" in more.stdout
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
    assert "no cluster could be read; check the kube contexts" in live.stderr
    assert "Traceback" not in live.stderr and not Path("/tmp/never-written.yaml").exists()


def test_why_needs_the_cluster_it_runs_on() -> None:
    for extra in ([], ["--snapshot", "example"]):
        res = gangway("why", "wf-abc", *extra, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
        assert res.returncode == 1 and "Traceback" not in res.stderr
        assert "why: pass --cluster NAME, a cluster of the platform config" in res.stderr
    res = gangway("why", "wf-abc", "--cluster", "us-east", "--snapshot", "example")
    assert res.returncode == 1 and "cannot load kube context gangway-us-east" in res.stderr


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


def test_submit_cluster_auto_keeps_what_the_hard_topology_allows() -> None:
    """--within block: hard at tier 2 (a block), even when a rack would do now."""
    res = gangway(
        "submit", PIPE, *GPUS, "--cluster", "auto", "--dry-run", "--snapshot", "example",
        "--gpu-type", "H100", "--within", "block",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    template = next(d for d in yaml.safe_load_all(res.stdout) if d["kind"] == "WorkflowTemplate")
    job = next(t for t in template["spec"]["templates"] if t.get("resource"))["resource"]
    assert "mode: hard\n    highestTierAllowed: 2" in job["manifest"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-p", "cluster=eu-west"], "-p cluster= and --cluster auto"),
        (["--cpu-pipeline", "--gpu-type", "H100"], "the pods request no GPUs"),
        (["--data-region", "us-east"], "not a region (eu-west-1, us-east-1); did you mean"),
        (["--snapshot", ""], "--snapshot: empty"),
    ],
    ids=[
        "cluster-parameter-too",
        "model-without-gpus",
        "cluster-name-for-region",
        "empty-snapshot",
    ],
)
def test_submit_cluster_auto_mistakes(args: list[str], says: str) -> None:
    pipe = CPU_PIPE if "--cpu-pipeline" in args else PIPE
    args = [a for a in args if a != "--cpu-pipeline"]
    base = ["submit", pipe, "-p", "nodes=2", "--cluster", "auto", "--dry-run"]
    res = gangway(*base, *(["--snapshot", "example"] if "--snapshot" not in args else []), *args)
    assert res.returncode == 1 and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_snapshot_save_refuses_an_output_that_is_not_a_file(tmp_path: Path) -> None:
    res = gangway("snapshot", "save", "-o", str(tmp_path))
    assert res.returncode == 1 and "not a regular file" in res.stderr
    blocker = tmp_path / "f"  # a missing directory is made; a file in the way is refused
    blocker.write_text("")
    res = gangway("snapshot", "save", "-o", str(blocker / "s.yaml"))
    assert res.returncode == 1 and f"{blocker} is a file, not a directory" in res.stderr
    res = gangway("snapshot", "save", "-o", "")
    assert res.returncode == 1 and "-o: give a file path" in res.stderr
    assert list(tmp_path.iterdir()) == [blocker]


def test_placement_options_need_cluster_auto() -> None:
    res = gangway("submit", PIPE, "--dry-run", "--gpu-type", "H100")
    assert res.returncode == 1 and "go with --cluster auto" in res.stderr


def test_submit_cluster_auto_sends_every_gang_where_all_of_them_can_run(tmp_path: Path) -> None:
    """A pipeline with a second gang that only us-east can hold (5 nodes of A100): the first
    gang alone would rank eu-west first, but everything goes to us-east."""
    compiled = gangway("compile", PIPE)
    assert compiled.returncode == 0, compiled.stderr
    obj = yaml.safe_load(compiled.stdout)
    dag = next(t for t in obj["spec"]["templates"] if t.get("dag"))
    train = next(t for t in dag["dag"]["tasks"] if t["name"] == "train")
    big = yaml.safe_load(yaml.safe_dump(train))
    big["name"] = "big"
    for a in big["arguments"]["parameters"]:
        if a["name"] == "nodes":
            a["value"] = "5"
    dag["dag"]["tasks"].append(big)
    path = tmp_path / "two-gangs.yaml"
    path.write_text(yaml.safe_dump(obj))
    args = ["-p", "nodes=1", "-p", "gpus-per-node=4", "--gpu-type", "A100", "--snapshot", "example"]
    res = gangway("submit", str(path), *args, "--cluster", "auto", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "all gangs go to us-east" in res.stderr and "--cluster auto: us-east" in res.stderr
    alone = gangway("explain", PIPE, *args, "--data-region", "eu-west-1")
    assert "1. eu-west" in alone.stdout  # what the first gang alone would choose


def test_a_manifest_that_is_not_yaml_is_a_one_line_error(tmp_path: Path) -> None:
    obj = yaml.safe_load(gangway("compile", PIPE).stdout)
    res_t = next(t for t in obj["spec"]["templates"] if t.get("resource"))
    res_t["resource"]["manifest"] += "\nbroken: [unclosed\n"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(obj))
    res = gangway("explain", str(path), *GPUS, "--gpu-type", "H100", "--snapshot", "example")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "not YAML" in res.stderr or "not valid YAML" in res.stderr


def test_a_placed_pipeline_reads_back_as_it_was_placed(tmp_path: Path) -> None:
    """What submit --cluster auto wrote (a product label, a hard rack) is what explain reads."""
    res = gangway(
        "submit", PIPE, *GPUS, "--cluster", "auto", "--dry-run", "--snapshot", "example",
        "--gpu-type", "H100", "--within", "rack",
    )  # fmt: skip
    template = next(d for d in yaml.safe_load_all(res.stdout) if d["kind"] == "WorkflowTemplate")
    placed = tmp_path / "placed.yaml"
    placed.write_text(yaml.safe_dump(template))
    again = gangway("explain", str(placed), *GPUS, "--snapshot", "example")
    assert again.returncode == 0, again.stderr
    assert "train: admit — 2 pods × 8 H100" in again.stdout
    assert "within one rack (tier 1, hard" in again.stdout
    three = gangway("explain", str(placed), "-p", "nodes=3", "-p", "gpus-per-node=8",
                    "--snapshot", "example")  # fmt: skip
    assert "train: reject" in three.stdout and "in one rack; at most 2 ever fit" in three.stdout


def test_cluster_auto_only_picks_clusters_it_can_submit_to(tmp_path: Path) -> None:
    doc = yaml.safe_load(Path("platform/gangway/scheduling/snapshot/example.yaml").read_text())
    doc["clusters"]["ap-south"] = {**doc["clusters"]["eu-west"], "region": "eu-west-1"}
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump(doc))
    args = ["-p", "nodes=1", "-p", "gpus-per-node=4", "--gpu-type", "A100", "--snapshot", str(snap)]
    ranked = gangway("explain", PIPE, *args, "--data-region", "eu-west-1")
    assert "ap-south" in ranked.stdout
    res = gangway(
        "submit", PIPE, *args, "--data-region", "eu-west-1", "--cluster", "auto", "--dry-run"
    )
    assert res.returncode == 0, res.stderr
    assert "--cluster auto: eu-west" in res.stderr or "--cluster auto: us-east" in res.stderr


def test_gpus_are_whole_devices() -> None:
    for value in ("0.5", "500m"):
        res = gangway("explain", PIPE, "-p", f"gpus-per-node={value}", "--snapshot", "example")
        # the typed parameter refuses it first; untyped pipelines get "GPUs are whole devices"
        assert res.returncode == 1 and "-p gpus-per-node: must be one of 1, 2, 4, 8" in res.stderr


def _doc_commands(page: str, after: str) -> list[list[str]]:
    """The ``gangway`` commands of the first bash block after ``after`` on ``page``, each
    as its words (continuation lines joined, comments dropped)."""
    import re
    import shlex

    text = (REPO / "docs" / page).read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(after) :], re.S)
    assert block is not None
    joined = block.group(1).replace("\\\n", " ")
    return [shlex.split(line, comments=True)[1:] for line in joined.splitlines() if line.strip()]


def test_the_scheduling_doc_try_it_commands_run_as_written() -> None:
    """docs/scheduling.md's "try it without a cluster" commands once used the CPU pipeline
    with a GPU parameter, and were refused; each runs as written (in process)."""
    from typer.testing import CliRunner

    from gangway.cli import app

    commands = _doc_commands("scheduling.md", "Try it without a cluster")
    assert [c[0] for c in commands] == ["explain", "submit", "queues", "snapshot"]
    for words in commands:
        res = CliRunner().invoke(app, words)
        assert res.exit_code == 0, (words, res.output[-2000:])


def test_explain_a_workload_file_as_tables_and_as_json() -> None:
    """The shipped workload file over the example snapshot: one gang fits in a rack now, the
    other starts by preempting a lower class of its queue; JSON says the same for scripts."""
    table = gangway("explain", "--workload", "example", "--snapshot", "example")
    assert table.returncode == 0, table.stderr
    assert "finetune-16gpu: admit" in table.stdout and "pretrain-24gpu: preempt" in table.stdout
    res = gangway("explain", "--workload", "example", "--snapshot", "example", "--output", "json")
    assert res.returncode == 0, res.stderr
    fits, preempts = json.loads(res.stdout)
    assert (fits["verdict"], fits["cluster"], fits["domain"]) == (
        "admit", "us-east", {"tier": "rack", "name": "use-h100-r3"}
    )  # fmt: skip
    assert sum(fits["nodes"].values()) == 2 and fits["victims"] == []
    assert fits["topology"] == {
        "highest_tier_allowed": 1, "tier": "rack", "mode": "hard",
        "gpu_product": "NVIDIA-H100-80GB-HBM3", "note": None,
    }  # fmt: skip
    assert [c["cluster"] for c in fits["clusters"]] == ["us-east", "eu-west"]
    assert fits["clusters"][1] | {"factors": None} == {
        "cluster": "eu-west", "verdict": "reject", "reason": "no H100 nodes in eu-west",
        "score": None, "factors": None, "notes": [],
    }  # fmt: skip
    assert preempts["verdict"] == "preempt" and sum(preempts["nodes"].values()) == 3
    (victim,) = preempts["victims"]
    assert victim["gang"] == "sweep-lr-3" and victim["rule"].startswith("preempt: same queue")
    assert preempts["workload"]["queue"] == "research"  # resolved from the team


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("team: reserch\npods: 2\nper_pod: {gpus: 8}\n", "team: no team 'reserch'"),
        ("team: research\npods: 0\nper_pod: {gpus: 8}\n",
         "w.yaml: 1 problem(s):\n  pods: Input should be greater than or equal to 1"),
        ("team: research\npods: 1\nper_pod: {gpu: 8}\ngpu_typ: H100\n",
         "per_pod.gpu: Extra inputs are not permitted; did you mean 'gpus'?\n"
         "  gpu_typ: Extra inputs are not permitted; did you mean 'gpu_type'?"),
        ("workloads: [3]\n", "workloads[0]: not a mapping of fields"),
        ("workloads: []\n", "workloads: give a list of workloads"),
        ("workloads: [{}]\nteam: x\n", "team: a file with workloads: holds nothing else"),
        ("- team: research\n", "expected a mapping"),
        ("team: [\n", "not valid YAML"),
    ],
    ids=["unknown-team", "no-pods", "misspelt-fields", "item-not-a-mapping", "empty-list",
         "workloads-and-more", "a-list", "not-yaml"],
)  # fmt: skip
def test_workload_file_mistakes_name_the_field(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(text)
    res = gangway("explain", "--workload", str(f), "--snapshot", "example")
    out = res.stdout + res.stderr
    assert says in out and "Traceback" not in out, out
    assert res.returncode == (0 if "no team" in says else 1)  # a rejection is a decision


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give a pipeline file or --workload FILE"),
        ([PIPE, "--workload", "example"], "give a pipeline file or --workload FILE"),
        (["--workload", "example", "-p", "nodes=2"], "-p: a workload file has no parameters"),
        (["--workload", "example", "--cluster", "mars"], "mars"),
        (["--workload", "example", "--output", "yaml"], "'yaml' is not one of 'table', 'json'"),
        (["--workload", "nowhere.yaml"], "nowhere.yaml: cannot read it"),
    ],
)
def test_explain_workload_mistakes(args: list[str], says: str) -> None:
    res = gangway("explain", *args, "--snapshot", "example")
    assert res.returncode != 0 and says in res.stdout + res.stderr, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr


def test_submit_cluster_auto_dry_run_as_json() -> None:
    res = gangway(
        "submit", PIPE, *GPUS, "--cluster", "auto", "--dry-run", "--snapshot", "example",
        "--gpu-type", "H100", "--within", "rack", "--output", "json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "clusters, best first" not in res.stderr  # the decision is in the document
    doc = json.loads(res.stdout)
    assert doc["placement"]["cluster"] == "us-east"
    (train,) = doc["placement"]["gangs"]
    assert train["verdict"] == "admit" and train["topology"]["mode"] == "hard"
    kinds = [o["kind"] for o in doc["objects"]]
    assert kinds == ["WorkflowTemplate", "Workflow"]
    plain = gangway("submit", CPU_PIPE, "--dry-run", "--output", "json")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["placement"] is None
