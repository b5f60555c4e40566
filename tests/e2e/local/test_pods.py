"""A local step's pod against Argo v4.1's: what its executor reads and stages
(``workflow/executor/executor.go``), the deadline its controller gives the pod
(``workflow/controller/workflowpod.go``, ``operator.go``), where its containers start and what a
directory artifact holds. Each workflow is in ``tests/argo_features/``."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.local._deadline import DEADLINE, NoPod, go_duration, pod_deadline
from gangway.local._pod import MAX_RESULT, _result
from tests.argo_features._expected import NOT_OK, ok
from tests.helpers.runs import check_nodes, describe, node, run

pytestmark = pytest.mark.timeout(60)


def test_output_parameters_lose_one_trailing_newline(tmp_path: Path) -> None:
    """Argo trims one ``\\n`` (only that: not ``\\r``, not a second one), a default's too."""
    res = run("output_param_newline", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"write": ok(), "read": ok("[42]")})
    assert node(res, "write").outputs == {
        "one": "42",
        "two": "a\n",
        "crlf": "x\r",
        "fallback": "unset",
    }


def test_a_timeout_leaves_the_pod_its_whole_seconds(tmp_path: Path) -> None:
    """``3s`` (from a parameter) → a 2 s pod that fails with the deadline message; ``2s`` →
    no pod, the node errors; a ``4s`` timeout replaces a 1 s activeDeadlineSeconds."""
    began = time.monotonic()
    res = run("template_timeout", tmp_path)
    took = time.monotonic() - began
    assert res.phase in NOT_OK, describe(res)
    check_nodes(res, {"slow": ("Failed", None), "tight": ("Error", None), "override": ok("done")})
    assert node(res, "slow").message == DEADLINE, describe(res)
    assert node(res, "tight").message == "tight exceeded its deadline", describe(res)
    assert 1.5 < took < 10, f"the 3s timeout stopped the step after {took:.1f}s"


def test_template_defaults_timeout_reaches_every_leaf(tmp_path: Path) -> None:
    """``spec.templateDefaults.timeout`` stops the slow leaf; the DAG inheriting it goes on."""
    began = time.monotonic()
    res = run("template_defaults_timeout", tmp_path)
    assert time.monotonic() - began < 10, "the 30 s sleep was not stopped"
    assert res.phase in NOT_OK, describe(res)
    check_nodes(res, {"slow": ("Failed", None), "quick": ok("quick")})
    assert node(res, "slow").message == DEADLINE, describe(res)


def test_a_script_source_is_staged_executable(tmp_path: Path) -> None:
    """Argo writes the script with mode 0755: ``sh -c PATH`` runs it (no exit code 126)."""
    res = run("script_exec_bit", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"by-path": ok("ran by path")})


def test_relative_paths_resolve_from_the_containers_working_directory(tmp_path: Path) -> None:
    """``/`` (no workingDir) or the workingDir: relative writes meet the declared paths."""
    res = run("working_dir_relative", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    assert node(res, "at-root").outputs == {"out": "hi"}, describe(res)
    assert node(res, "in-dir").outputs == {"abs": "w", "rel": "r"}, describe(res)


def test_a_tmp_directory_artifact_is_collected_whole(tmp_path: Path) -> None:
    """``path: /tmp/`` collects the pod's /tmp, the volume mounted inside it included."""
    res = run("dir_artifact_tmp", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"make": ok(), "show": ok("./gw-a.txt ./gw-vol/v.txt a\nv")})
    assert node(res, "make").artifacts["tmpdir"].endswith("/tmpdir.tgz"), describe(res)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("500ms", 0.5), ("0", 0.0),
     ("-2s", -2.0), ("1h2m3.5s", 3723.5), (".5s", 0.5), ("3µs", 3e-6)],
)  # fmt: skip
def test_timeouts_are_go_durations(text: str, seconds: float) -> None:
    """``time.ParseDuration``, which the controller reads ``timeout`` with."""
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", 'time: invalid duration ""'), ("ten", 'time: invalid duration "ten"'),
     ("5", 'time: missing unit in duration "5"'), ("1d", 'time: unknown unit "d" in duration "1d"'),
     ("1s2", 'time: missing unit in duration "1s2"'), (".s", 'time: invalid duration ".s"')],
)  # fmt: skip
def test_a_malformed_duration_says_what_go_says(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        go_duration(text)


def test_a_malformed_timeout_errors_the_node_and_a_bare_number_is_refused() -> None:
    """Argo's controller errors the node ("invalid timeout format. …"); its validation
    refuses a whole number (a duration needs a unit)."""
    now = time.monotonic()
    template = {"name": "t", "timeout": "{{inputs.parameters.t}}"}
    with pytest.raises(NoPod, match=r'^invalid timeout format\. time: invalid duration "ten"'):
        pod_deadline(template, {"inputs.parameters.t": "ten"}, started=now, node="n")
    with pytest.raises(PermanentError, match=r"template t\.timeout: '10' has no unit"):
        pod_deadline(template, {"inputs.parameters.t": "10"}, started=now, node="n")


def test_the_deadline_counts_from_the_nodes_start() -> None:
    """Whole seconds left when the pod is created; 1 or less: no pod. Without a timeout,
    activeDeadlineSeconds (substituted) is the pod's."""
    now = time.monotonic()
    left = pod_deadline({"name": "t", "timeout": "10s"}, {}, started=now - 3.5, node="n").left()
    assert left is not None and 5 < left <= 6
    with pytest.raises(NoPod, match=r"^n exceeded its deadline$"):
        pod_deadline({"name": "t", "timeout": "10s"}, {}, started=now - 8.5, node="n")
    ads = {"name": "t", "activeDeadlineSeconds": "{{inputs.parameters.d}}"}
    left = pod_deadline(ads, {"inputs.parameters.d": "7"}, started=now, node="n").left()
    assert left is not None and 6 < left <= 7
    assert pod_deadline({"name": "t"}, {}, started=now, node="n").left() is None


def test_the_result_keeps_the_end_of_a_long_output() -> None:
    """Argo trims one newline, then keeps the last 256 KiB of stdout."""
    out = b"head" + b"x" * MAX_RESULT + b"tail\n"
    got = _result(out)
    assert len(got) == MAX_RESULT and got.endswith("xtail") and "head" not in got
