"""The local executor on small hand-written workflows: DAG order, parameters, fan-out, when,
retries by the exit-code contract (with a fake clock), gang restarts, and refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gangway.argo.conditions import resource_condition
from gangway.argo.depends import TaskState, parse_depends
from gangway.argo.expressions import evaluate
from gangway.argo.retries import LastAttempt, duration_seconds, next_retry, retry_expression
from gangway.errors import PermanentError
from gangway.local import (
    Clock,
    LocalExecutor,
    UnsupportedConstruct,
    Watch,
    retry_pipeline,
    run_pipeline,
    workflow_from_template,
)
from tests.helpers.builders import GANG_POLICIES, WRITE, py, workflow
from tests.helpers.builders import gang_job as _gang


def run(
    wt: dict[str, Any],
    tmp: Path,
    overrides: dict[str, str] | None = None,
    sleeps: list[float] | None = None,
    parallelism: int = 1,
) -> Any:
    wf = workflow_from_template(wt, overrides)
    sleep = sleeps.append if sleeps is not None else lambda s: None
    return LocalExecutor(wf, tmp, clock=Clock(sleep=sleep), parallelism=parallelism).run()


def test_dag_order_parameters_and_outputs(tmp_path: Path) -> None:
    wt = workflow(
        {
            "produce": py(WRITE.format(name="x", value="sys.argv[1] * 2") + "", outputs=["x"]),
            "consume": py(
                "import sys; assert sys.argv[1] == 'abab', sys.argv; "
                + WRITE.format(name="y", value="sys.argv[1] + '!'"),
                inputs=["v"],
                outputs=["y"],
            ),
        },
        [
            {
                "name": "b",
                "template": "consume",
                "depends": "a",
                "arguments": {
                    "parameters": [{"name": "v", "value": "{{tasks.a.outputs.parameters.x}}"}]
                },
            },
            {"name": "a", "template": "produce"},
        ],
        params={"word": "ab"},
    )
    wt["spec"]["templates"][0]["container"]["args"] = ["{{workflow.parameters.word}}"]
    wt["spec"]["templates"][1]["container"]["args"] = ["{{inputs.parameters.v}}"]
    res = run(wt, tmp_path)
    assert res.phase == "Succeeded", [(n.name, n.message) for n in res.nodes]
    assert [n.name for n in res.nodes] == ["a", "b"]
    assert res.nodes[1].outputs == {"y": "abab!"}
    again = run(wt, tmp_path / "2", overrides={"word": "ab"})
    assert again.phase == "Succeeded"


def test_fan_out_with_param_and_items(tmp_path: Path) -> None:
    echo = py(WRITE.format(name="o", value="sys.argv[1].upper()"), inputs=["v"], outputs=["o"])
    echo["container"]["args"] = ["{{inputs.parameters.v}}"]
    wt = workflow(
        {
            "list": py(
                WRITE.format(name="l", value="json.dumps([{'k': 'p'}, {'k': 'q'}])").replace(
                    "import os, sys", "import os, sys, json"
                ),
                outputs=["l"],
            ),
            "echo": echo,
        },
        [
            {"name": "gen", "template": "list"},
            {
                "name": "each",
                "template": "echo",
                "depends": "gen",
                "withParam": "{{tasks.gen.outputs.parameters.l}}",
                "arguments": {"parameters": [{"name": "v", "value": "{{item.k}}"}]},
            },
            {
                "name": "lit",
                "template": "echo",
                "withItems": ["x", "y", "z"],
                "arguments": {"parameters": [{"name": "v", "value": "{{item}}"}]},
            },
        ],
    )
    res = run(wt, tmp_path, parallelism=2)
    assert res.phase == "Succeeded"
    fanned = sorted((n for n in res.nodes if n.task == "each"), key=lambda n: n.name)
    assert [n.outputs["o"] for n in fanned] == ["P", "Q"]
    assert len([n for n in res.nodes if n.task == "lit"]) == 3


def test_when_false_skips_and_dependents_still_run(tmp_path: Path) -> None:
    wt = workflow(
        {"ok": py("pass")},
        [
            {"name": "maybe", "template": "ok", "when": "'{{workflow.parameters.flag}}' == 'yes'"},
            {"name": "after", "template": "ok", "depends": "maybe"},
        ],
        params={"flag": "no"},
    )
    res = run(wt, tmp_path)
    assert [(n.name, n.phase) for n in res.nodes] == [("maybe", "Skipped"), ("after", "Succeeded")]


CONTRACT = {
    "limit": 3,
    "retryPolicy": "Always",
    "expression": retry_expression(),
    "backoff": {"duration": "2s", "factor": 2, "maxDuration": "1m"},
}


def _flaky(codes: list[int], counter: Path) -> str:
    return (
        f"import os, signal, pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) "
        f"if p.exists() else 0; p.write_text(str(n + 1)); codes = {codes!r}; c = codes[min(n, "
        "len(codes) - 1)]; os.kill(os.getpid(), signal.SIGKILL) if c == 137 else "
        "exit(c)"
    )


@pytest.mark.parametrize(
    ("codes", "attempts", "phase", "sleeps"),
    [
        pytest.param(
            [75, 143, 0], 3, "Succeeded", [2.0, 4.0], id="transient-then-preempted-then-ok"
        ),
        pytest.param([137, 0], 2, "Succeeded", [2.0], id="killed-node-error-retried"),
        pytest.param([1, 0], 1, "Failed", [], id="permanent-error-fails-fast"),
        pytest.param([75], 4, "Failed", [2.0, 4.0, 8.0], id="retries-are-bounded"),
    ],
)
def test_retries_follow_the_exit_code_contract(
    tmp_path: Path, codes: list[int], attempts: int, phase: str, sleeps: list[float]
) -> None:
    wt = workflow(
        {"flaky": py(_flaky(codes, tmp_path / "n"), retry=CONTRACT)},
        [{"name": "f", "template": "flaky"}],
    )
    slept: list[float] = []
    res = run(wt, tmp_path / "s", sleeps=slept)
    (node,) = res.nodes
    assert (node.attempts, node.phase, slept) == (attempts, phase, sleeps)
    assert res.phase == ("Succeeded" if phase == "Succeeded" else "Failed")


def test_failure_omits_dependents(tmp_path: Path) -> None:
    wt = workflow(
        {"bad": py("exit(1)"), "ok": py("pass")},
        [{"name": "a", "template": "bad"}, {"name": "b", "template": "ok", "depends": "a"}],
    )
    res = run(wt, tmp_path)
    assert [(n.name, n.phase) for n in res.nodes] == [("a", "Failed"), ("b", "Omitted")]


def test_gang_pods_get_the_pytorch_plugin_env(tmp_path: Path) -> None:
    # Each rank writes its file; the master then waits for the others, as a final barrier
    # would (its completion completes the Job, and the controller stops the rest).
    code = (
        f"import os, pathlib, time; d = pathlib.Path({str(tmp_path)!r}); "
        "(d / os.environ['RANK']).write_text(os.environ['WORLD_SIZE'] + ' ' + "
        "os.environ['MASTER_ADDR']); "
        "[time.sleep(0.01) for _ in range(2000) if os.environ['RANK'] == '0' "
        "and len([p for p in d.iterdir() if p.name.isdigit()]) < 3]"
    )
    wt = workflow(
        {"g": _gang(code, pods=3, max_retry=0, policies=GANG_POLICIES)},
        [{"name": "train", "template": "g"}],
    )
    res = run(wt, tmp_path / "s")
    assert res.phase == "Succeeded", res.nodes[0].message
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    assert (tmp_path / "2").read_text() == "3 127.0.0.1"


def test_gang_restarts_whole_job_on_pod_failure_then_succeeds(tmp_path: Path) -> None:
    # The master outlives the worker's failure, as a torchrun master blocked on it would.
    flaky = (
        f"import os, pathlib, time; p = pathlib.Path({str(tmp_path)!r}, 'r' + os.environ['RANK']); "
        "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
        "time.sleep(1.0 if os.environ['RANK'] == '0' else 0); "
        "exit(75 if (n == 0 and os.environ['RANK'] == '1') else 0)"
    )
    wt = workflow(
        {"g": _gang(flaky, pods=2, max_retry=2, policies=GANG_POLICIES)},
        [{"name": "train", "template": "g"}],
    )
    res = run(wt, tmp_path / "s")
    assert res.phase == "Succeeded", res.nodes[0].message
    assert "1 gang restart" in res.nodes[0].message
    assert (tmp_path / "r1").read_text() == "2"


def test_gang_aborts_on_permanent_error_without_restart(tmp_path: Path) -> None:
    wt = workflow(
        {"g": _gang("exit(1)", pods=2, max_retry=3, policies=GANG_POLICIES)},
        [{"name": "train", "template": "g"}],
    )
    res = run(wt, tmp_path / "s")
    assert res.phase == "Failed" and "Aborted" in res.nodes[0].message
    assert "restart" not in res.nodes[0].message


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda wt: wt["spec"]["templates"].append(
                {"name": "h", "http": {"url": "https://example.com"}}
            ),
            "`http` cannot run locally",
            id="http",
        ),
        pytest.param(
            lambda wt: wt["spec"].update(onExit="ghost"),
            "spec.onExit 'ghost'",
            id="on-exit-unknown",
        ),
        pytest.param(
            lambda wt: wt["spec"]["templates"][0].update(
                inputs={"artifacts": [{"name": "a", "path": "/x", "http": {"url": "https://e"}}]}
            ),
            "input artifact a comes from http",
            id="remote-artifact",
        ),
        pytest.param(
            lambda wt: wt["spec"]["templates"][-1]["dag"]["tasks"][0].update(
                templateRef={"name": "x", "template": "y"}
            ),
            "templateRef",
            id="template-ref",
        ),
        pytest.param(
            lambda wt: wt["spec"]["templates"][-1]["dag"]["tasks"][0].update(depends="a ||"),
            "depends 'a \\|\\|' is not valid",
            id="depends-malformed",
        ),
    ],
)
def test_unsupported_constructs_are_refused_by_name(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    wt = workflow({"ok": py("pass")}, [{"name": "a", "template": "ok"}])
    mutate(wt)
    with pytest.raises(UnsupportedConstruct, match=message):
        run(wt, tmp_path)


def test_every_unsupported_construct_is_listed_before_anything_runs(tmp_path: Path) -> None:
    """One refusal names them all, each with its path, and no step has run."""
    marker = tmp_path / "ran"
    wt = workflow(
        {"ok": py(f"open({str(marker)!r}, 'w')")},
        [
            {"name": "a", "template": "ok"},
            {"name": "b", "template": "ok", "depends": "a || c", "continueOn": {"failed": True}},
            {"name": "c", "template": "nope", "dependencies": ["ghost"]},
        ],
    )
    wt["spec"]["onExit"] = "ghost"
    wt["spec"]["templates"].append({"name": "call", "http": {"url": "https://example.com"}})
    wt["spec"]["templates"][0]["retryStrategy"] = {"retryPolicy": "Sometimes", "limit": 1}
    wt["spec"]["templates"][0]["container"]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    ]
    with pytest.raises(UnsupportedConstruct) as refused:
        run(wt, tmp_path / "state")
    message = str(refused.value)
    for expected in (
        "spec.onExit 'ghost' names no template",
        "spec.templates[0] (ok).retryStrategy: retryPolicy 'Sometimes'",
        "spec.templates[0] (ok): secret 's' key 'k' is not on this machine",
        "GANGWAY_SECRET_S_K",
        "spec.templates[1] (main).dag.tasks[2] (task c): unknown template 'nope'",
        "spec.templates[1] (main).dag.tasks[2] (task c): depends on unknown task 'ghost'",
        "spec.templates[2] (call): `http` cannot run locally",
    ):
        assert expected in message
    assert message.startswith("the local executor cannot run 6 constructs")
    assert not marker.exists() and not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("status", "code", "retries_done", "elapsed", "delay"),
    [
        ("Failed", 75, 0, 0.0, 5.0),  # transient: retried after the base duration
        ("Failed", 143, 2, 0.0, 20.0),  # preempted: duration * factor ** retries so far
        ("Error", None, 0, 0.0, 5.0),  # a pod-level error: retried
        ("Failed", 1, 0, 0.0, None),  # permanent: never
        ("Failed", 75, 3, 0.0, None),  # the limit reached
        ("Failed", 75, 2, 110.0, None),  # 110 s + 20 s would pass maxDuration (2m)
    ],
)
def test_next_retry_is_argo_s_decision(
    status: str, code: int | None, retries_done: int, elapsed: float, delay: float | None
) -> None:
    strategy = {
        "limit": 3,
        "retryPolicy": "Always",
        "expression": retry_expression(),
        "backoff": {"duration": "5s", "factor": 2, "maxDuration": "2m"},
    }
    last = LastAttempt(status, code, "")
    assert next_retry(strategy, last, retries_done=retries_done, elapsed=elapsed) == delay


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("500ms", 0.5), ("10", 10.0), (None, 0.0)],
)
def test_backoff_durations_read_as_go_durations(text: str | None, seconds: float) -> None:
    assert duration_seconds(text) == seconds


def test_conditions_and_expressions_that_cannot_be_read_are_refused_up_front(
    tmp_path: Path,
) -> None:
    """Not after the gang has trained: a condition or retry expression this executor cannot
    evaluate, or a backoff it cannot read, is named before anything runs."""
    wt = workflow({"ok": py("pass")}, [{"name": "a", "template": "ok"}])
    wt["spec"]["templates"][0]["retryStrategy"] = {
        "limit": 1,
        "expression": "lastRetry.status matches 'Err.*'",
        "backoff": {"duration": "1 day"},
    }
    wt["spec"]["templates"].append(
        {
            "name": "job",
            "resource": {"action": "create", "manifest": "{}", "successCondition": "phase ~ x"},
        }
    )
    with pytest.raises(UnsupportedConstruct) as refused:
        run(wt, tmp_path)
    for expected in (
        "retryStrategy.expression",
        "retryStrategy.backoff.duration",
        "(job).resource.successCondition",
    ):
        assert expected in str(refused.value)


def test_an_error_found_mid_run_ends_the_run_with_a_result_not_a_raise(tmp_path: Path) -> None:
    """What only shows when a step is about to run (an unknown variable) ends the run as
    Failed with the error named, so the caller still prints the summary and closes MLflow."""
    wt = workflow(
        {"ok": py("pass"), "bad": py("pass")},
        [{"name": "a", "template": "ok"}, {"name": "b", "template": "bad", "depends": "a"}],
    )
    wt["spec"]["templates"][1]["container"]["args"] = ["{{workflow.nonsense}}"]
    res = run(wt, tmp_path)
    assert res.phase == "Failed" and "unknown variable" in res.error
    assert [(n.name, n.phase) for n in res.nodes] == [("a", "Succeeded"), ("b", "Error")]
    assert "unknown variable" in res.nodes[1].message


def test_unknown_parameter_override_lists_the_real_ones() -> None:
    wt = workflow({"ok": py("pass")}, [{"name": "a", "template": "ok"}], params={"steps": "1"})
    with pytest.raises(PermanentError, match=r"unknown parameter.*stepz.*takes: steps"):
        workflow_from_template(wt, {"stepz": "2"})


def test_resource_conditions_and_depends() -> None:
    done = {"status": {"state": {"phase": "Completed"}}}
    assert resource_condition("status.state.phase == Completed", done)
    assert not resource_condition("status.state.phase in (Failed,Aborted,Terminated)", done)
    clause = parse_depends("(a || b.Failed) && !c.Skipped", where="t")
    assert clause.tasks == ("a", "b", "c")
    assert clause.holds(
        {"a": TaskState("Skipped"), "b": TaskState("Succeeded"), "c": TaskState("Succeeded")}
    )
    assert not clause.holds(
        {"a": TaskState("Failed"), "b": TaskState("Succeeded"), "c": TaskState("Omitted")}
    )
    assert parse_depends("a", where="t").holds(
        {"a": TaskState("Failed", continue_on=frozenset({"Failed"}))}
    )


@pytest.mark.parametrize(
    ("expr", "scope", "value"),
    [
        (retry_expression(), {"lastRetry.status": "Failed", "lastRetry.exitCode": "143"}, True),
        (retry_expression(), {"lastRetry.status": "Failed", "lastRetry.exitCode": "1"}, False),
        (retry_expression(), {"lastRetry.status": "Error", "lastRetry.exitCode": ""}, True),
        ("asInt(inputs.parameters.nodes) - 1", {"inputs.parameters.nodes": "4"}, 3),
        ("'a' == 'a' && !false", {}, True),
    ],
)
def test_expressions(expr: str, scope: dict[str, str], value: object) -> None:
    assert evaluate(expr, scope) == value


def test_expressions_refuse_python_escapes() -> None:
    with pytest.raises(UnsupportedConstruct):
        evaluate("__import__('os').system('true')", {})
    with pytest.raises(UnsupportedConstruct):
        evaluate("x.__class__", {"x": "1"})


def test_run_pipeline_is_a_library_call(tmp_path: Path) -> None:
    """What `gangway run` does, from Python: compile, record, run, report where things are;
    the run is recorded for `gangway retry`, which refuses a run that succeeded."""
    pipeline = tmp_path / "tiny_pipeline.py"
    pipeline.write_text(
        "from hera.workflows import DAG, Container, Parameter, WorkflowTemplate\n"
        "with WorkflowTemplate(name='tiny', entrypoint='main',\n"
        "                      arguments=[Parameter(name='word', value='hi')]) as w:\n"
        "    say = Container(name='say', image='x', command=['python', '-c',\n"
        "                    'import sys; print(sys.argv[1])'],\n"
        "                    args=['{{workflow.parameters.word}}'])\n"
        "    with DAG(name='main'):\n"
        "        say(name='a') >> say(name='b')\n"
    )
    seen: list[str] = []
    done = run_pipeline(
        pipeline,
        {"word": "hello"},
        tmp_path / "state",
        watch=Watch(on_event=lambda n: seen.append(f"{n.name}:{n.phase}")),
    )
    assert done.result.phase == "Succeeded" and done.lineage is None  # no tracking parameter
    assert [n.name for n in done.result.nodes] == ["a", "b"]
    log = done.result.nodes[0].log
    assert log is not None and "hello" in log.read_text()
    assert seen == ["a:Running", "a:Succeeded", "b:Running", "b:Succeeded"]
    assert ("logs", f"{done.result.state_dir}/logs") in done.locations()
    with pytest.raises(PermanentError, match="nothing to retry"):
        retry_pipeline(tmp_path / "state")


@pytest.mark.parametrize(
    ("fail", "status"),
    [(False, "Succeeded"), (True, "Failed")],
    ids=["after-success", "after-failure"],
)
def test_exit_handler_runs_last_with_the_workflow_status(
    tmp_path: Path, fail: bool, status: str
) -> None:
    """spec.onExit runs once the DAG has ended, as node NAME.onExit, with workflow.status and
    workflow.failures; the workflow's phase is the DAG's."""
    seen = tmp_path / "seen"
    wt = workflow(
        {
            "work": py("raise SystemExit(1)" if fail else "pass"),
            "bye": py(
                f"import sys; open({str(seen)!r}, 'w').write(sys.argv[1] + '|' + sys.argv[2])"
            ),
        },
        [{"name": "a", "template": "work"}],
    )
    wt["spec"]["templates"][1]["container"]["args"] = [
        "{{workflow.status}}",
        "{{workflow.failures}}",
    ]
    wt["spec"]["onExit"] = "bye"
    result = run(wt, tmp_path / "state")
    assert result.phase == status
    assert result.nodes[-1].name.endswith(".onExit") and result.nodes[-1].phase == "Succeeded"
    got_status, failures = seen.read_text().split("|", 1)
    assert got_status == status
    assert [f["displayName"] for f in json.loads(failures)] == (["a"] if fail else [])


def test_a_failing_exit_handler_fails_the_workflow(tmp_path: Path) -> None:
    wt = workflow(
        {"work": py("pass"), "bye": py("raise SystemExit(3)")}, [{"name": "a", "template": "work"}]
    )
    wt["spec"]["onExit"] = "bye"
    result = run(wt, tmp_path / "state")
    assert result.phase == "Failed"
    assert result.nodes[-1].phase == "Failed"


def test_a_command_that_cannot_start_is_an_error_node_not_an_internal_error(
    tmp_path: Path,
) -> None:
    """A container whose command is not on this machine (known only once its value is
    filled) fails that node with the command named, as a pod that cannot start does."""
    wt = workflow(
        {
            "run": {
                "container": {"image": "x", "command": ["{{inputs.parameters.cmd}}"]},
                "inputs": {"parameters": [{"name": "cmd"}]},
            }
        },
        [
            {
                "name": "a",
                "template": "run",
                "arguments": {
                    "parameters": [{"name": "cmd", "value": "no-such-command-on-this-machine"}]
                },
            }
        ],
    )
    res = run(wt, tmp_path)
    (node,) = res.nodes
    assert (res.phase, node.phase) == ("Failed", "Error")
    assert "'no-such-command-on-this-machine' could not start" in node.message
    assert "internal error" not in node.message + res.error


def test_a_bad_with_param_ends_the_run_naming_the_task(tmp_path: Path) -> None:
    """A withParam that is not a JSON list is an Error node naming the task, not a crash."""
    wt = workflow(
        {"ok": py("pass")},
        [{"name": "a", "template": "ok", "withParam": "not json"}],
    )
    res = run(wt, tmp_path)
    assert res.phase == "Failed" and "task a: withParam is not a JSON list" in res.error


def test_a_cycle_an_unknown_task_reference_and_a_bad_sequence_are_refused_first(
    tmp_path: Path,
) -> None:
    """What only fails mid-run otherwise (after other steps ran) is refused before anything
    runs: tasks waiting on each other, ``{{tasks.ghost…}}``, withSequence count and end."""
    marker = tmp_path / "ran"
    wt = workflow(
        {"ok": py(f"open({str(marker)!r}, 'w')", inputs=["x"])},
        [
            {"name": "z", "template": "ok", "arguments": {"parameters": [{"name": "x"}]}},
            {"name": "a", "template": "ok", "depends": "b"},
            {"name": "b", "template": "ok", "depends": "a"},
            {
                "name": "c",
                "template": "ok",
                "arguments": {"parameters": [{"name": "x", "value": "{{tasks.ghost.id}}"}]},
            },
            {"name": "d", "template": "ok", "withSequence": {"count": "2", "end": "3"}},
        ],
    )
    with pytest.raises(UnsupportedConstruct) as refused:
        run(wt, tmp_path / "state")
    message = str(refused.value)
    assert "in a cycle: a -> b -> a" in message
    assert "(task c): refers to unknown task 'ghost'" in message
    assert "(task d): withSequence takes count or end, not both" in message
    assert not marker.exists()
