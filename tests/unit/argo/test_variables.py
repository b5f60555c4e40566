"""Local runs against Argo v4.1 in variables, retries and up-front checks: a retryStrategy
without a limit, the default retry policy, ``{{retries}}`` / ``{{lastRetry.*}}`` /
``{{node.name}}`` / ``{{pod.name}}`` / ``{{tasks.name}}`` / ``{{steps.name}}``, the outputs of
a task that did not run, the workflow's artifact arguments, and what is refused before
anything runs (a container with only ``args``, inline templates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gangway.argo.nodes import argo_node_name, go_float, pod_name
from gangway.argo.retries import LastAttempt, next_retry
from gangway.errors import UnsupportedConstruct
from gangway.local._retry import UNBOUNDED_RETRIES, retry_limit
from gangway.local.session import Watch
from gangway.local.validation import unsupported, with_defaults
from tests.argo_features._expected import ok
from tests.helpers.runs import check_nodes, describe, executor, node, run

pytestmark = pytest.mark.timeout(120)


# ---- retries ------------------------------------------------------------------------------


def test_a_retry_strategy_without_limit_is_capped_locally_and_says_so(tmp_path: Path) -> None:
    """Argo retries ``retryStrategy: {}`` without end, under OnFailure: a step that always
    fails is retried (here up to the local cap, which the run says before it starts, the node
    when it starts and its message at the end); a step killed by a signal ends Error, which
    OnFailure does not retry."""
    events: list[tuple[str, str, str]] = []
    notices: list[str] = []
    watch = Watch(on_event=lambda n: events.append((n.name, n.phase, n.message)))
    watch.notify = notices.append
    res = run("retry_unbounded", tmp_path, watch=watch)
    assert res.phase == "Failed", describe(res)
    assert any("always-fails, killed" in m and "without limit" in m for m in notices), notices
    always, killed = node(res, "always"), node(res, "killed")
    assert (always.phase, always.attempts) == ("Failed", UNBOUNDED_RETRIES + 1), describe(res)
    assert f"local cap of {UNBOUNDED_RETRIES} retries" in always.message, always.message
    assert (killed.phase, killed.attempts) == ("Error", 1), describe(res)
    first = next(m for name, phase, m in events if name == "always" and phase == "Running")
    assert "has no limit" in first and str(UNBOUNDED_RETRIES) in first, first


def test_an_expression_without_policy_retries_errors_too(tmp_path: Path) -> None:
    """With ``expression`` and no ``retryPolicy`` Argo's policy is Always: the attempt killed
    by a signal (Error) is retried while the expression — ``lastRetry.duration`` in it —
    holds."""
    res = run("retry_expression_policy", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    flaky = node(res, "flaky")
    assert (flaky.attempts, flaky.result) == (2, "attempt=2"), describe(res)


def test_the_retry_limit_as_read_locally() -> None:
    """No retryStrategy: no retries; one without ``limit``: the local cap; a limit from a
    variable: its value."""
    assert retry_limit({}, {}, "t").strategy["limit"] == 0
    capped = retry_limit({"retryStrategy": {}}, {}, "t")
    assert (capped.strategy["limit"], capped.capped) == (UNBOUNDED_RETRIES, True)
    assert "has no limit" in capped.notice
    scope = {"inputs.parameters.n": "4"}
    own = retry_limit({"retryStrategy": {"limit": "{{inputs.parameters.n}}"}}, scope, "t")
    assert (own.strategy["limit"], own.capped, own.notice) == (4, False, "")


def test_last_retry_duration_in_the_retry_expression() -> None:
    """``lastRetry.duration`` is the seconds the last attempt ran, as Go writes the number."""
    strategy = {"limit": 3, "expression": "asFloat(lastRetry.duration) < 5"}
    quick = LastAttempt("Failed", 1, "", seconds=0.5)
    slow = LastAttempt("Failed", 1, "", seconds=7.0)
    assert next_retry(strategy, quick, retries_done=0, elapsed=0.5) == 0.0
    assert next_retry(strategy, slow, retries_done=0, elapsed=7.0) is None
    assert (go_float(7.0), go_float(0.5)) == ("7", "0.5")


def test_the_workflows_retry_strategy_is_every_templates_default() -> None:
    """Argo uses ``spec.retryStrategy`` for each template that has none of its own."""
    spec = {
        "retryStrategy": {"limit": 2},
        "templates": [{"name": "a", "container": {}}, {"name": "b", "retryStrategy": {}}],
    }
    a, b = with_defaults(spec)
    assert (a["retryStrategy"], b["retryStrategy"]) == ({"limit": 2}, {})


def test_template_defaults_merge_as_argo_merges_them() -> None:
    """One merge for the executor and lint: a type-specific default (``container``) reaches
    only a template of that type, maps merge key by key, sidecars by name."""
    spec = {
        "templateDefaults": {
            "container": {"env": [{"name": "A", "value": "1"}], "workingDir": "/w"},
            "sidecars": [{"name": "s", "image": "x"}],
            "timeout": "3s",
        },
        "templates": [
            {"name": "c", "container": {"image": "alpine"}, "sidecars": [{"name": "s"}]},
            {"name": "d", "dag": {"tasks": []}},
        ],
    }
    c, d = with_defaults(spec)
    assert c["container"] == {"image": "alpine", "env": [{"name": "A", "value": "1"}],
                              "workingDir": "/w"}  # fmt: skip
    assert c["sidecars"] == [{"name": "s", "image": "x"}] and c["timeout"] == "3s"
    assert "container" not in d and d["timeout"] == "3s"


# ---- variables ----------------------------------------------------------------------------


def test_argo_node_and_pod_names() -> None:
    """A node's full name starts with the workflow's; a pod is WORKFLOW-TEMPLATE-FNV1a(node)
    (FNV-1a of "a" is 0xe40c292c), the entrypoint's own pod is the workflow."""
    assert argo_node_name("wf", "") == "wf"
    assert argo_node_name("wf", "task.sub") == "wf.task.sub"
    assert argo_node_name("wf", "[0].step") == "wf[0].step"
    assert argo_node_name("wf", "wf.onExit") == "wf.onExit"
    assert pod_name("wf", "a", "tmpl") == f"wf-tmpl-{0xE40C292C}"
    assert pod_name("wf", "a", "") == f"wf-{0xE40C292C}"
    assert pod_name("wf", "wf", "tmpl") == "wf"


def test_retries_last_retry_node_pod_and_task_names(tmp_path: Path) -> None:
    """Attempt 2 of a retried step sees ``retries`` 2 and the attempt before's exit code and
    status; ``node.name`` is the retried node's full name, ``pod.name`` the attempt's pod;
    ``tasks.name`` / ``steps.name`` the calling task's or step's name."""
    wf, ex = executor("vars_retries_node_name", tmp_path)
    res = ex.run()
    name = wf["metadata"]["name"]
    assert res.phase == "Succeeded", describe(res)
    tried = f"2 4 Failed {name}.try {pod_name(name, f'{name}.try(2)', 'flaky')} try"
    echoed = f"{name}.nested[0].echo {pod_name(name, f'{name}.nested[0].echo', 'plain')} echo"
    check_nodes(res, {"try": ok(tried), "nested[0].echo": ok(echoed)})
    assert node(res, "try").attempts == 3


# ---- the outputs of a task that did not run -----------------------------------------------


def test_the_outputs_of_a_skipped_or_omitted_task(tmp_path: Path) -> None:
    """Argo v4.1: a Skipped (or Omitted) task's output is its ``valueFrom.default``; an
    argument that is only a reference to an output without one is dropped when its input
    has a default."""
    res = run("skipped_outputs", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(
        res,
        {
            "producer": ("Skipped", None),
            "gate": ok("open"),
            "omitted": ("Omitted", None),
            "use-default": ok("fallback"),
            "use-input-default": ok("mine"),
            "use-omitted": ok("fallback"),
        },
    )


def test_an_absent_output_fails_the_task_that_refers_to_it(tmp_path: Path) -> None:
    """Argo v4.1: an output of a Skipped task with no default, passed to an input without one,
    is an unhandled absent optional: the consumer ends Error, naming the reference."""
    res = run("skipped_outputs_absent", tmp_path)
    assert res.phase == "Failed", describe(res)
    consumer = node(res, "consumer")
    assert consumer.phase == "Error", describe(res)
    assert "absent optional" in consumer.message, consumer.message
    assert "tasks.producer.outputs.parameters.bare" in consumer.message, consumer.message


# ---- artifacts ----------------------------------------------------------------------------


def test_workflow_artifact_arguments_reach_the_entrypoint(tmp_path: Path) -> None:
    """``spec.arguments.artifacts`` are the entrypoint's input artifacts; a raw one passes on
    with ``from: "{{inputs.artifacts.NAME}}"``."""
    res = run("workflow_artifact_args", tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"show": ok("hello from the workflow")})


def test_a_workflow_artifact_argument_from_a_cluster_store_is_refused() -> None:
    """An artifact argument from S3 cannot be fetched here: refused up front, with its path."""
    wf: dict[str, Any] = {
        "metadata": {"name": "w"},
        "spec": {
            "entrypoint": "t",
            "arguments": {"artifacts": [{"name": "data", "s3": {"key": "k"}}]},
            "templates": [{"name": "t", "container": {"command": ["sh"]}}],
        },
    }
    (problem,) = unsupported(wf)
    assert problem.startswith("spec.arguments.artifacts: artifact data comes from s3"), problem


# ---- refused before anything runs ---------------------------------------------------------


def _refused(module: str, tmp_path: Path) -> str:
    """The one message refusing ``module`` before anything ran (nothing recorded)."""
    with pytest.raises(UnsupportedConstruct) as refused:
        run(module, tmp_path)
    assert not (tmp_path / "state" / "runs").exists(), "something ran before the refusal"
    return str(refused.value)


def test_a_container_with_only_args_is_refused_up_front(tmp_path: Path) -> None:
    """Args without a command would run the image's entrypoint, unknown here: refused, naming
    the template's path and its image."""
    message = _refused("args_only", tmp_path)
    assert message.startswith("spec.templates[1] (say).container: args without command"), message
    assert "docker/whalesay:latest" in message, message


def test_inline_templates_are_checked_up_front(tmp_path: Path) -> None:
    """An inline template (nested ones too) is checked as a named one is, in one message."""
    message = _refused("inline_checked", tmp_path)
    steps = "spec.templates[1] (main).steps"
    assert f"{steps}[1][0] (step say).inline.container: args without command" in message
    nested = f"{steps}[2][0] (step nested).inline.dag.tasks[0] (task moo).inline.container"
    assert f"{nested}: command 'cowsay-gw-missing'" in message, message
