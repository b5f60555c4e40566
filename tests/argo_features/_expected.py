"""What Argo does with each feature workflow: the phase it ends in, and each node's phase and
result (the table ``tests/e2e/local/test_features.py`` runs), and the constructs each compiles
to."""

from __future__ import annotations

import pytest

__all__ = [
    "ANY",
    "CASES",
    "CONSTRUCTS",
    "ERROR",
    "FAILED",
    "NOT_OK",
    "OMITTED",
    "SKIPPED",
    "Want",
    "ok",
]

NOT_OK = ("Failed", "Error")
"""Argo ends a workflow Failed, or Error when the failing node errored (it never ran, or its
outputs were missing)."""

ANY = "*"
"""A node phase not checked (a daemon's, once its DAG has ended and stopped it)."""

Want = tuple[str, str | None]
"""A node's expected phase and result (None: result not checked)."""


def ok(result: str | None = None) -> Want:
    """A node that Succeeded (with ``result`` as its stdout, when given)."""
    return ("Succeeded", result)


SKIPPED: Want = ("Skipped", None)
OMITTED: Want = ("Omitted", None)
FAILED: Want = ("Failed", None)
ERROR: Want = ("Error", None)


S = ("Succeeded",)
F = ("Failed",)
CASES = [
    pytest.param("hello_container", S, {"say": ok("hello argo")}, id="lone-container"),
    pytest.param("hello_script", S, {"greet": ok("hello from a script")}, id="lone-script"),
    pytest.param(
        "steps_basic",
        S,
        {"[0].first": ok("one"), "[1].left": ok("L-one"), "[1].right": ok("R-one"),
         "[1].never": SKIPPED, "[2].join": ok("L-one+R-one")},
        id="steps-groups-parallel-when",
    ),
    pytest.param(
        "steps_loops",
        S,
        {"[0].gen": ok('["x", "y"]'), "[1].items(0:a)": ok("a"), "[1].items(1:b)": ok("b"),
         "[1].maps(0:0)": ok("p"), "[1].maps(1:1)": ok("q"),
         "[1].param(0:x)": ok("got-x"), "[1].param(1:y)": ok("got-y"),
         "[1].count(0:0)": ok("0"), "[1].count(1:1)": ok("1"), "[1].count(2:2)": ok("2"),
         "[1].range(0:2)": ok("2"), "[1].range(1:3)": ok("3"), "[1].range(2:4)": ok("4"),
         "[1].fmt(0:v01)": ok("v01"), "[1].fmt(1:v02)": ok("v02")},
        id="steps-withItems-withParam-withSequence",
    ),
    pytest.param(
        "steps_calls_dag",
        S,
        {"[0].prep": ok("p"), "[1].inner.x": ok("x-p"), "[1].inner.y": ok("x-p-y")},
        id="steps-call-a-dag",
    ),
    pytest.param(
        "dag_calls_steps",
        S,
        {"inner[0].one": ok("1"), "inner[1].two": ok("12"), "after": ok("done")},
        id="dag-calls-steps",
    ),
    pytest.param(
        "recursion",
        S,
        {"[0].dec": ok("2"), "[1].again[0].dec": ok("1"), "[1].again[1].again[0].dec": ok("0"),
         "[1].again[1].again[1].again": SKIPPED},
        id="bounded-recursion",
    ),
    pytest.param(
        "template_outputs",
        S,
        {"calc.add": ok(), "words[0].one": ok("alpha"), "words[1].two": ok("alpha-beta"),
         "pick.flip": ok("heads"), "pick.heads": ok("picked-heads"), "pick.tails": SKIPPED,
         "show": ok("5 alpha-beta picked-heads")},
        id="dag-and-steps-template-outputs",
    ),
    pytest.param(
        "depends_logic",
        S,
        {"good": ok(), "bad": FAILED, "skipped": SKIPPED, "on-bad-failed": ok(), "either": ok(),
         "neither": OMITTED, "not-skipped": OMITTED, "not-failed": ok(), "grouped": ok(),
         "bare-skipped": ok()},
        id="depends-grammar-failure-handled",
    ),
    pytest.param(
        "depends_failure",
        F,
        {"bad": FAILED, "after": OMITTED, "legacy": OMITTED, "all-bad(0:1)": FAILED,
         "all-bad(1:2)": FAILED, "needs-one": OMITTED},
        id="unhandled-failure-omits-dependants",
    ),
    pytest.param(
        "depends_loops",
        S,
        {"mixed(0:0)": ok(), "mixed(1:1)": FAILED, "mixed(2:2)": FAILED, "all-bad(0:3)": FAILED,
         "all-bad(1:4)": FAILED, "any-ok": ok(), "all-failed": ok()},
        id="depends-AnySucceeded-AllFailed",
    ),
    pytest.param(
        "legacy_dependencies",
        S,
        {"a": ok("A"), "b": ok("AB"), "c": ok("AC"), "d": ok("AB+AC")},
        id="legacy-dependencies-diamond",
    ),
    pytest.param(
        "when_expressions",
        S,
        {"flip": ok("heads"), "heads": ok("it was heads"), "tails": SKIPPED,
         "heads-under-limit": ok("both"), "big(0:1)": SKIPPED, "big(1:2)": SKIPPED,
         "big(2:3)": ok("3"), "big(3:4)": ok("4")},
        id="when-unquoted-strings-and-numbers",
    ),
    pytest.param(
        "continue_on",
        S,
        {"[0].shaky": FAILED, "[0].steady": ok("steady"), "[1].next": ok("Failed:1")},
        id="continueOn-failed",
    ),
    pytest.param(
        "artifacts_passing",
        S,
        {"make": ok(), "read-note": ok("hello-file"),
         "read-tree": ok("a.txt=alpha sub/b.txt=beta")},
        id="artifact-file-and-directory",
    ),
    pytest.param(
        "runner_artifacts",
        S,
        {"produce": ok(), "consume": ok()},
        id="hera-runner-artifacts",
    ),
    pytest.param("artifacts_raw", S, {"show": ok("[gw]\nmode=raw")}, id="raw-input-artifact"),
    pytest.param(
        "outputs_optional",
        S,
        {"maybe": ok("wrote nothing"), "after": ok("after")},
        id="optional-artifact-not-written",
    ),
    pytest.param(
        "outputs_missing",
        NOT_OK,
        {"no-art": ERROR, "no-param": ERROR},
        id="required-outputs-not-written",
    ),
    pytest.param(
        "exit_handler_succeeded",
        S,
        {"work": ok("working"), "{wf}.onExit[0].celebrate": ok("status=Succeeded"),
         "{wf}.onExit[1].mourn": SKIPPED},
        id="workflow-onExit-after-success",
    ),
    pytest.param(
        "task_on_exit",
        F,
        {"good": ok("fine"), "good.onExit": ok("tidied"), "broken": FAILED,
         "broken.onExit": ok("tidied")},
        id="task-onExit-whatever-the-outcome",
    ),
    pytest.param(
        "lifecycle_hook",
        S,
        {"work": ok("payload-7"), "work.hooks.exit": ok("hook saw payload-7")},
        id="lifecycle-hook-exit",
    ),
    pytest.param("container_set", S, {"trio": ok("QUIET")}, id="containerSet-dependencies"),
    pytest.param("init_containers", S, {"greet": ok("prepared-by-init")}, id="initContainers"),
    pytest.param("daemon", S, {"server": (ANY, None), "client": ok("pong")}, id="daemon-ip"),
    pytest.param("sidecar", S, {"main": ok("sidecar-says-hi")}, id="sidecar"),
    pytest.param(
        "volumes_claim",
        S,
        {"write": ok(), "read": ok("kept-on-the-claim")},
        id="volumeClaimTemplates-shared",
    ),
    pytest.param(
        "volumes_empty_dir",
        S,
        {"write": ok("mine"), "check": ok("fresh")},
        id="emptyDir-per-pod",
    ),
]  # fmt: skip


CONSTRUCTS = {
    "artifacts_archive": ['"none"'],
    "artifacts_raw": ['"raw"'],
    "container_set": ['"containerSet"', '"dependencies"'],
    "continue_on": ['"continueOn"'],
    "daemon": ['"daemon"', '"readinessProbe"'],
    "deadline_template": ['"activeDeadlineSeconds"'],
    "deadline_workflow": ['"activeDeadlineSeconds"'],
    "depends_failure": ['"dependencies"'],
    "init_containers": ['"initContainers"', '"emptyDir"'],
    "lifecycle_hook": ['"hooks"'],
    "outputs_optional": ['"optional"'],
    "outputs_params": ['"globalName"', '"default"'],
    "parallelism_one": ['"parallelism"'],
    "retry_dag": ['"retryStrategy"'],
    "retry_leaf": ['"retryStrategy"', '"volumeClaimTemplates"'],
    "secret_env": ['"secretKeyRef"'],
    "sidecar": ['"sidecars"'],
    "steps_loops": ['"withItems"', '"withParam"', '"withSequence"', '"format"'],
    "suspend_duration": ['"suspend"', '"duration"'],
    "suspend_manual": ['"suspend"'],
    "task_on_exit": ['"onExit"'],
    "template_outputs": ['"expression"', '"parameter"'],
    "unsupported": ['"resource"', '"http"', '"plugin"', '"greeting"'],
    "volumes_claim": ['"volumeClaimTemplates"'],
    "when_expressions": ['"when"'],
}
"""Keys each module's compiled Workflow must contain: the construct the module is about."""
