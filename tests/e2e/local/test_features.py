"""Local runs against Argo's documented semantics: every workflow in ``tests/argo_features/``
(small Hera workflows written for this project) runs as `gangway run FILE` runs it
(:func:`gangway.local.session.run_pipeline`; a few tests drive the executor directly, to
resume it from another thread) and ends the way Argo would end it: workflow phase, which
nodes ran, were Skipped or Omitted, results, outputs, messages."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from gangway.errors import UnsupportedConstruct
from tests.argo_features._expected import (
    CASES,
    CONSTRUCTS,
    FAILED,
    NOT_OK,
    Want,
    ok,
)
from tests.helpers.runs import (
    Run,
    check_nodes,
    compiled,
    contract,
    describe,
    executor,
    modules,
    node,
    phases,
    run,
    text,
)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("module", "phase", "want"), CASES)
def test_workflow_ends_as_argo_ends_it(
    module: str, phase: tuple[str, ...], want: dict[str, Want], tmp_path: Path
) -> None:
    """Argo ends the workflow in this phase, with exactly these nodes, phases and results."""
    wf, ex = executor(module, tmp_path)
    res: Run = ex.run()
    assert res.phase in phase, describe(res)
    check_nodes(res, want, wf["metadata"]["name"])


@pytest.mark.parametrize("module", modules())
def test_feature_workflow_compiles(module: str) -> None:
    """Each feature module's ``w`` compiles to a Workflow holding the construct it is about."""
    wf = compiled(module)
    assert wf["kind"] == "Workflow" and wf["spec"]["entrypoint"]
    dumped = json.dumps(wf)
    for key in CONSTRUCTS.get(module, []):
        assert key in dumped, f"{module} compiles without {key}"


def test_results_and_exit_codes(tmp_path: Path) -> None:
    """Argo passes stdout as outputs.result and the exit code as ``{{tasks.X.exitCode}}``."""
    res = run("outputs_result", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"calc": ok("42"), "shout": ok("loud"), "both": ok("42-loud"),
                      "quit": FAILED, "codes": ok("3/0")})  # fmt: skip
    assert (node(res, "quit").exit_code, node(res, "shout").exit_code) == (3, 0)


def test_output_parameters_and_global_outputs(tmp_path: Path) -> None:
    """Argo reads valueFrom.path, falls back to valueFrom.default, and publishes globalName."""
    res = run("outputs_params", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"write": ok(), "read": ok("42 unset blue")})
    assert node(res, "write").outputs == {"answer": "42", "fallback": "unset", "colour": "blue"}
    assert res.outputs == {"favourite-colour": "blue"}


def test_exit_handler_sees_status_and_failures(tmp_path: Path) -> None:
    """Argo runs onExit after a failure with workflow.status Failed and the failed node listed."""
    wf, ex = executor("exit_handler_failed", tmp_path)
    res: Run = ex.run()
    assert res.phase == "Failed", describe(res)
    check_nodes(res, {"boom": FAILED, "{wf}.onExit": ok()}, wf["metadata"]["name"])
    summary = node(res, f"{wf['metadata']['name']}.onExit").result or ""
    assert summary.startswith("Failed boom:Failed:"), summary
    assert "exit code 3" in summary, summary


def test_archive_default_is_tgz_and_none_is_plain(tmp_path: Path) -> None:
    """Argo stores an output artifact as NAME.tgz unless archive is none; inputs get the file."""
    res = run("artifacts_archive", tmp_path)
    check_nodes(res, {"make": ok(), "both": ok("same-bytes same-bytes")})
    stored = node(res, "make").artifacts
    assert stored["packed"].endswith(".tgz"), stored
    assert not stored["plain"].endswith(".tgz"), stored
    if urlparse(stored["packed"]).scheme == "file":
        assert Path(urlparse(stored["packed"]).path).read_bytes()[:2] == b"\x1f\x8b"
        assert Path(urlparse(stored["plain"]).path).read_bytes() == b"same-bytes\n"


def test_retry_strategy_on_a_leaf(tmp_path: Path) -> None:
    """Argo retries a failed leaf up to ``limit`` more times; the third attempt succeeds."""
    res = run("retry_leaf", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    flaky = node(res, "flaky")
    assert (flaky.phase, flaky.attempts, flaky.result) == ("Succeeded", 3, "3"), describe(res)


def test_retry_strategy_on_a_dag(tmp_path: Path) -> None:
    """Argo reruns a whole DAG template when it fails; the caller continues after the retry."""
    res = run("retry_dag", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    assert [n.phase for n in res.nodes if n.task == "bump"] == ["Failed", "Succeeded"]
    assert node(res, "report").result == "runs=2"


def test_suspend_with_duration_resumes_itself(tmp_path: Path) -> None:
    """Argo holds a suspend node for its duration, then carries on without anyone resuming."""
    began = time.monotonic()
    res = run("suspend_duration", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"[0].before": ok(), "[1].pause": ok(), "[2].after": ok("after")})
    assert time.monotonic() - began >= 1.0


def test_suspend_without_duration_auto_resumed(tmp_path: Path) -> None:
    """A suspend without duration is released by the executor's ``auto_resume``."""
    res = run("suspend_manual", tmp_path, auto_resume=True)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"[0].before": ok(), "[1].approve": ok(), "[2].after": ok("approved")})


@contextlib.contextmanager
def in_thread(ex: Any) -> Iterator[list[Run]]:
    """Run ``ex`` in a thread; the list holds its RunResult once it has ended."""
    out: list[Run] = []
    worker = threading.Thread(target=lambda: out.append(ex.run()), daemon=True)
    worker.start()
    try:
        yield out
    finally:
        worker.join(timeout=60)


def test_suspend_waits_for_resume(tmp_path: Path) -> None:
    """Argo keeps a suspended workflow running until ``argo resume``, then finishes it."""
    wf, ex = executor("suspend_manual", tmp_path)
    errors: list[str] = []
    with in_thread(ex) as out:
        time.sleep(1.0)
        assert not out, "the run ended while suspended"
        deadline = time.monotonic() + 30
        while not out and time.monotonic() < deadline:
            try:
                contract().resume(tmp_path / "state", wf["metadata"]["name"])
            except Exception as exc:  # not suspended yet: try again
                errors.append(repr(exc))
            time.sleep(0.2)
    assert out, f"resume did not end the run; resume errors: {errors[-3:]}"
    assert out[0].phase == "Succeeded", describe(out[0])
    assert node(out[0], "[2].after").result == "approved"


@pytest.mark.parametrize("source", ["file", "env"])
def test_env_from_secret(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Argo sets an env var from secretKeyRef {name, key}: the secret's value for that key."""
    monkeypatch.delenv("GANGWAY_SECRET_GW_CREDS_API_TOKEN", raising=False)
    if source == "file":
        (tmp_path / "secrets" / "gw-creds").mkdir(parents=True)
        (tmp_path / "secrets" / "gw-creds" / "api-token").write_text("s3cr3t")
    else:
        monkeypatch.setenv("GANGWAY_SECRET_GW_CREDS_API_TOKEN", "s3cr3t")
    res = run("secret_env", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    assert node(res, "show").result == "token=s3cr3t"


def test_missing_secret_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Argo cannot start a pod whose secretKeyRef is missing; the error names secret and key."""
    monkeypatch.delenv("GANGWAY_SECRET_GW_CREDS_API_TOKEN", raising=False)
    try:  # refusing before anything runs is as good as failing the node
        res = run("secret_env", tmp_path)
    except Exception as exc:
        message = str(exc).lower()
    else:
        assert res.phase in NOT_OK, describe(res)
        assert node(res, "show").phase in NOT_OK, describe(res)
        message = text(res)
    assert "gw-creds" in message and "api-token" in message, message


@pytest.mark.parametrize(
    ("module", "node_name"),
    [("deadline_template", "slow"), ("deadline_workflow", "slow")],
    ids=["template-deadline", "workflow-deadline"],
)
def test_active_deadline_stops_the_step(module: str, node_name: str, tmp_path: Path) -> None:
    """Argo kills a step past activeDeadlineSeconds (template or workflow) and fails it."""
    began = time.monotonic()
    res = run(module, tmp_path)
    assert time.monotonic() - began < 15, "the 30 s sleep was not stopped"
    assert res.phase in NOT_OK, describe(res)
    assert node(res, node_name).phase in NOT_OK, describe(res)
    assert "deadline" in text(res) or "duration limit" in text(res), describe(res)
    assert phases(res).get("later") in (None, "Omitted", "Skipped"), describe(res)


def test_the_exit_handler_runs_after_the_workflow_deadline(tmp_path: Path) -> None:
    """Argo runs the exit handler once the deadline has stopped the workflow."""
    res = run("deadline_workflow", tmp_path)
    (bye,) = [n for n in res.nodes if n.name.endswith(".onExit")]
    assert (bye.phase, bye.result) == ("Succeeded", "bye Failed"), describe(res)


def spans(res: Run) -> list[tuple[float, float]]:
    """The ``START END`` each timed task printed, in start order."""
    found = [tuple(map(float, (n.result or "").split())) for n in res.nodes]
    return sorted((s, e) for s, e in found)


@pytest.mark.parametrize(
    ("module", "overlap"),
    [("parallelism_one", False), ("parallelism_free", True)],
    ids=["parallelism-1-serial", "no-limit-parallel"],
)
def test_workflow_parallelism(module: str, overlap: bool, tmp_path: Path) -> None:
    """Argo runs at most ``spec.parallelism`` pods at once; without it all ready tasks run."""
    res = run(module, tmp_path, parallelism=4)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"one": ok(), "two": ok(), "three": ok()})
    times = spans(res)
    overlapping = any(b[0] < a[1] - 0.05 for a, b in itertools.pairwise(times))
    assert overlapping is overlap, times


def test_unsupported_constructs_are_refused_together(tmp_path: Path) -> None:
    """A resource, an http and a plugin template cannot run locally: one error names them all."""
    with pytest.raises(UnsupportedConstruct) as refused:
        executor("unsupported", tmp_path)
    message = str(refused.value)
    for template in ("make-configmap", "call-webhook", "run-plugin"):
        assert template in message, message
    for construct in ("resource", "http", "plugin"):
        assert construct in message.lower(), message


def test_hera_runner_artifacts_reach_the_paths_the_runner_reads(tmp_path: Path) -> None:
    """Hera's runner reads its input artifacts at the paths its annotations name (Hera's
    default input directory, an explicit path) and writes its outputs where Hera's outputs
    directory is: both reach the step's own directories, so the size counts both copies."""
    res = run("runner_artifacts", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    assert node(res, "consume").outputs == {"size": "12"}, describe(res)
    assert node(res, "produce").artifacts["data"].endswith("/data.tgz")
