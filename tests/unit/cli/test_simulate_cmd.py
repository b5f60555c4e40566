"""``gangway simulate`` as a user meets it: a small made-up trace end to end (CSV, summary,
plot), capacity planning on the shipped example snapshot, and every mistake in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.helpers import gangway
from tests.helpers.builders import small_trace

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The made-up trace written as the published CSV files are."""
    d = tmp_path_factory.mktemp("trace")
    nodes, pods = small_trace(scale=10)
    rows = [f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model}" for n in nodes]
    (d / "nodes.csv").write_text("\n".join([NODE_HEADER, *rows]) + "\n")
    lines = [
        f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},"
        f"{'|'.join(sorted(p.models))},LS,Running"
        for p in pods
    ]
    (d / "pods.csv").write_text("\n".join([POD_HEADER, *lines]) + "\n")
    return d / "nodes.csv", d / "pods.csv"


@pytest.fixture(scope="module")
def result(files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim") / "out"
    nodes, pods = files
    res = gangway(
        "simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "2",
        "--policy", "random,bestfit,gangway,fgd", "--out", str(out), "--jobs", "2",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "gangway" in res.stdout and "at 100 %" in res.stdout and "wrote" in res.stdout
    assert "Traceback" not in res.stderr
    return out


def test_the_csv_has_a_row_per_policy_seed_and_arrived_percent(result: Path) -> None:
    with (result / "allocation.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["policy", "seed", "arrived_pct", "gpu_alloc_pct"]
    assert len(rows) == 4 * 2 * 131
    keys = {(r["policy"], r["seed"]) for r in rows}
    assert keys == {(p, s) for p in ("random", "bestfit", "gangway", "fgd") for s in ("42", "43")}
    assert sorted({int(r["arrived_pct"]) for r in rows}) == list(range(131))
    at100 = [float(r["gpu_alloc_pct"]) for r in rows if r["arrived_pct"] == "100"]
    assert all(50 < v <= 100 for v in at100)


def test_the_summary_and_the_plot(result: Path) -> None:
    text = (result / "summary.md").read_text()
    for word in ("| gangway | 2 |", "| fgd | 2 |", "at 100 %", "at 130 %", "failed pods"):
        assert word in text
    assert "fragmented GPU %" in text and "150 nodes, 720 GPUs" in text
    assert (result / "allocation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_capacity_planning_on_a_snapshot_and_a_workload_file(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    _, pods = files
    res = gangway(
        "simulate", "--snapshot", "example", "--cluster", "us-east", "--pods", str(pods),
        "--seeds", "1", "--policy", "gangway", "--out", str(tmp_path),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "--snapshot example --cluster us-east" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--policy", "gangwya"], "--policy 'gangwya': no such policy"),
        (["--policy", "gangwya"], "did you mean gangway?"),
        (["--policy", ","], "--policy: name at least one"),
        (["--seeds", "0"], "--seeds 0: give 1 to 1000"),
        (["--tune", "0"], "--tune 0.0: give a ratio in (0, 10]"),
        (["--jobs", "0"], "--jobs 0: give 1 or more"),
        (["--snapshot", "example"], "give --nodes FILE or --snapshot FILE, not both"),
        (["--cluster", "us-east"], "--cluster goes with --snapshot"),
        (["--out", ""], "--out: give a directory"),
        (["--pods", " "], "--pods: give a file"),
    ],
    ids=["policy-typo", "policy-hint", "no-policy", "no-seeds", "no-tune", "no-jobs",
         "nodes-and-snapshot", "cluster-without-snapshot", "empty-out", "empty-pods"],
)  # fmt: skip
def test_a_bad_option_is_one_line_naming_it(
    files: tuple[Path, Path], tmp_path: Path, args: list[str], says: str
) -> None:
    nodes, pods = files
    res = gangway("simulate", "--nodes", str(nodes), "--pods", str(pods), "--out",
                  str(tmp_path / "o"), *args)  # fmt: skip
    assert res.returncode != 0 and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "o" / "allocation.csv").exists()


def test_bad_files_are_named_with_line_and_column(files: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = files
    broken = tmp_path / "pods.csv"
    lines = pods.read_text().splitlines()
    lines[3] = lines[3].replace(",LS,", ",LS,").split(",", 2)[0] + ",12x,1024,1,1000,,LS,Running"
    broken.write_text("\n".join(lines) + "\n")
    cases = [
        (["--nodes", str(nodes), "--pods", str(broken)], f"{broken}:4: column cpu_milli: '12x'"),
        (["--nodes", str(tmp_path / "none.csv"), "--pods", str(pods)], "none.csv: cannot read"),
        (["--nodes", str(pods), "--pods", str(pods)], ":1: missing column(s) sn"),
        (["--snapshot", "example", "--cluster", "us-eats", "--pods", str(pods)],
         "did you mean 'us-east'?"),
        (["--nodes", str(nodes), "--pods", str(pods), "--out", str(pods)], "not a directory"),
    ]  # fmt: skip
    for args, says in cases:
        res = gangway("simulate", *args, "--out", str(tmp_path / "o"), "--seeds", "1")
        if "--out" in args:
            res = gangway("simulate", *args, "--seeds", "1")
        assert res.returncode == 1 and says in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_help_explains_the_method_and_the_outputs() -> None:
    res = gangway("simulate", "--help")
    assert res.returncode == 0
    for word in ("allocation.csv", "summary.md", "allocation.png", "--tune", "--snapshot"):
        assert word in res.stdout


def test_odd_paths_and_hopeless_pods_are_reported_as_they_are(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    nodes, pods = files
    odd = tmp_path / "pods[bold].csv"
    text = pods.read_text().splitlines()
    text.append("huge,1000,1024,16,1000,,LS,Running")  # more GPUs than any node has
    odd.write_text("\n".join(text) + "\n")
    out = tmp_path / "res[/]"
    res = gangway("simulate", "--nodes", str(nodes), "--pods", str(odd), "--seeds", "1",
                  "--policy", "bestfit", "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"{odd}:{len(text)}: column num_gpu: 16, but the most on any node is 8" in res.stderr
    assert f"wrote {out / 'summary.md'}" in res.stdout
    summary = (out / "summary.md").read_text()
    assert "1 that no node could take" in summary and "seed 42," in summary


def test_out_is_checked_before_the_replay(files: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = files
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    res = gangway("simulate", "--nodes", str(nodes), "--pods", str(pods),
                  "--out", str(tmp_path / "dangling"))  # fmt: skip
    assert res.returncode == 1 and "a link to nothing" in res.stderr, res.stderr
    assert "replaying" not in res.stderr


@pytest.fixture(scope="module")
def gang_result(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gangs") / "out"
    res = gangway(
        "simulate", "--gangs", "generate", "--fleet", "example", "--hours", "48",
        "--seeds", "1", "--out", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "tightest %" in res.stdout
    return out


def test_gangs_end_to_end_write_the_summary_the_csvs_and_the_plot(gang_result: Path) -> None:
    summary = (gang_result / "gang_summary.md").read_text()
    assert "| gangway |" in summary and "| binpack |" in summary and "| random |" in summary
    with (gang_result / "gang_allocation.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 48 and {r["policy"] for r in rows} == {"gangway", "binpack", "random"}
    with (gang_result / "gang_results.csv").open() as f:
        gangs = list(csv.DictReader(f))
    with (gang_result / "gangs.csv").open() as f:
        assert len(gangs) == 3 * len(list(csv.DictReader(f)))
    assert (gang_result / "gang_allocation.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gangs", "generate"], "--gangs needs --fleet"),
        (
            ["--gangs", "generate", "--fleet", "example", "--policy", "binpak"],
            "did you mean 'binpack'",
        ),
        (
            ["--gangs", "generate", "--fleet", "example", "--policy", "bestfit"],
            "with --gangs, one of",
        ),
        (["--gangs", "generate", "--fleet", "example", "--layout", "8x4"], "--layout '8x4'"),
        (["--gangs", "generate", "--fleet", "example", "--hours", "0"], "--hours 0"),
        (["--gangs", "generate", "--fleet", "example", "--load", "9"], "--load 9"),
        (
            ["--gangs", "generate", "--fleet", "example", "--cluster", "trian"],
            "did you mean 'train'",
        ),
        (["--gangs", "nowhere.csv", "--fleet", "example"], "nowhere.csv"),
        (["--gangs", "generate", "--fleet", "example", "--pods", "p.csv"], "leave out --pods"),
        (["--fleet", "example"], "give the workload"),
    ],
    ids=[
        "no-fleet",
        "policy-typo",
        "pod-policy",
        "layout",
        "hours",
        "load",
        "cluster-typo",
        "no-file",
        "pods-too",
        "no-workload",
    ],
)
def test_gang_mistakes_are_one_line(args: list[str], says: str, tmp_path: Path) -> None:
    res = gangway("simulate", *args, "--out", str(tmp_path / "o"))
    assert res.returncode != 0 and says in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
