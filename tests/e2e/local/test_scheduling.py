"""Scheduling as Argo does it: ``dag.target`` filled like any field, the template's own
``parallelism`` and ``failFast`` applied to every child (fanned-out items included), a failed
task that does not stop a DAG, and no limit on steps side by side unless one is asked for —
each outcome the same whether the run lets one step or any number run at once."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hera.workflows import DAG, Task, Workflow

from gangway.argo.dag_phase import TaskEnd, dag_phase, leaf_tasks
from gangway.errors import UnsupportedConstruct
from gangway.local._boundary import FAIL_FAST, Budget
from tests.argo_features._build import sh
from tests.argo_features._expected import FAILED, OMITTED, ok
from tests.helpers.builders import GANG_POLICIES, workflow
from tests.helpers.builders import gang_job as _gang
from tests.helpers.runs import Run, check_nodes, compiled, describe, executor, node, text

pytestmark = pytest.mark.timeout(120)

BOTH = pytest.mark.parametrize("parallelism", [1, None], ids=["one-at-a-time", "no-limit"])
"""Argo's outcome does not depend on how many steps this machine runs at once."""


def run(module: str, tmp_path: Path, parallelism: int | None, **params: str) -> Run:
    """Run ``module``'s workflow (its parameters overridden by ``params``) to its end."""
    if not params:
        _, ex = executor(module, tmp_path, parallelism=parallelism)
        res: Run = ex.run()
        return res
    local = importlib.import_module("gangway.local")
    to_wf = importlib.import_module("gangway.local.workflow").workflow_from_template
    wf = to_wf(compiled(module), params)
    res = local.LocalExecutor(wf, tmp_path / "state", parallelism=parallelism).run()
    return res


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of these ``(start, end)`` spans that overlap at one time."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    return max(itertools.accumulate(d for _, d in edges), default=0)


def stamp(text: str) -> tuple[float, float]:
    """``START END`` as numbers."""
    start, end = text.split()
    return float(start), float(end)


def stamped(res: Run) -> list[tuple[float, float]]:
    """The ``START END`` each node printed."""
    return [stamp(n.result or "") for n in res.nodes]


# ---- dag.target ---------------------------------------------------------------------------


@BOTH
def test_target_from_a_parameter_runs_that_task_and_its_dependencies(
    parallelism: int | None, tmp_path: Path
) -> None:
    """Argo fills ``dag.target`` (``{{workflow.parameters.target}}``) before reading it."""
    res = run("dag_target_param", tmp_path, parallelism)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"a": ok("A"), "b": ok("B")})
    both = run("dag_target_param", tmp_path / "2", parallelism, target="b c")
    assert both.phase == "Succeeded", describe(both)
    check_nodes(both, {"a": ok("A"), "b": ok("B"), "c": ok("C")})


def test_a_target_that_names_no_task_is_an_error(tmp_path: Path) -> None:
    """Argo ends the workflow in Error, "target nope does not exist", and runs no task."""
    res = run("dag_target_unknown", tmp_path, None)
    assert res.phase == "Failed" and "target nope does not exist" in res.error, describe(res)
    assert not [n for n in res.nodes if n.phase != "Error"], describe(res)
    # split at each space as Argo splits it: "a,b" is one name, no task
    commas = run("dag_target_unknown", tmp_path / "2", None, target="a,b")
    assert "target a,b does not exist" in commas.error, describe(commas)


def test_a_literal_target_that_names_no_task_is_refused_up_front(tmp_path: Path) -> None:
    """Argo refuses it when the workflow is submitted: the target is not defined."""
    with pytest.raises(UnsupportedConstruct, match="target 'nope' is not defined"):
        executor("dag_target_literal", tmp_path)


# ---- failFast and parallelism of a template -----------------------------------------------


@BOTH
def test_fail_fast_starts_no_item_after_a_failure(parallelism: int | None, tmp_path: Path) -> None:
    """``failFast: true`` and ``parallelism: 1`` on a steps template: after ``bad`` no item
    (and no later group) starts, and the template fails with Argo's message."""
    res = run("loop_fail_fast", tmp_path, parallelism)
    assert res.phase == "Failed", describe(res)
    check_nodes(
        res,
        {"[0].each(0:ok)": ok(), "[0].each(1:bad)": FAILED, "[0].each(2:later)": OMITTED,
         "[1].after": OMITTED},
    )  # fmt: skip
    assert FAIL_FAST in node(res, "[0].each(2:later)").message, describe(res)


@BOTH
def test_without_fail_fast_every_item_runs(parallelism: int | None, tmp_path: Path) -> None:
    """Without the template's ``failFast`` (its default) Argo runs every item, one at a
    time, and the failed one fails the step, so the next group does not run."""
    res = run("loop_no_fail_fast", tmp_path, parallelism)
    assert res.phase == "Failed", describe(res)
    check_nodes(
        res,
        {"[0].each(0:ok)": ok(), "[0].each(1:bad)": FAILED, "[0].each(2:later)": ok(),
         "[1].after": OMITTED},
    )  # fmt: skip
    assert "failfast enabled" not in text(res), describe(res)


@BOTH
def test_fail_fast_dag_starts_no_task_after_a_failure(
    parallelism: int | None, tmp_path: Path
) -> None:
    """A DAG template with ``failFast: true``: once ``bad`` failed no other task starts."""
    res = run("dag_fail_fast_template", tmp_path, parallelism)
    assert res.phase == "Failed", describe(res)
    check_nodes(res, {"bad": FAILED, "x": OMITTED, "y": OMITTED})
    assert FAIL_FAST in node(res, "x").message


@BOTH
def test_a_failed_task_does_not_stop_the_dag(parallelism: int | None, tmp_path: Path) -> None:
    """``dag.failFast`` (default true) does not stop ready tasks starting: Argo runs ``after``
    once ``slow`` ends, after ``bad`` has failed, and Omits only what needed ``bad``."""
    res = run("dag_failure_goes_on", tmp_path, parallelism)
    assert res.phase == "Failed", describe(res)
    check_nodes(res, {"bad": FAILED, "slow": ok("slow"), "after": ok("ok"), "needs-bad": OMITTED})


def test_a_failure_a_later_task_recovers_from_leaves_the_dag_succeeded(tmp_path: Path) -> None:
    """Argo reads the DAG's phase from its target tasks: ``b`` failed, but the leaf ``d``
    (``a && (b || c)``) ran and succeeded, so the workflow Succeeds."""
    res = run("dag_phase_recovered", tmp_path, None)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, {"a": ok("ok"), "b": FAILED, "c": ok("ok"), "d": ok("ok")})


def test_an_omitted_leaf_takes_the_failed_phase_of_its_branch(tmp_path: Path) -> None:
    """``on-success`` is Omitted after ``flip`` failed and inherits Failed: the workflow
    Fails although ``on-failure`` handled the failure."""
    res = run("dag_phase_omitted_leaf", tmp_path, None)
    assert res.phase == "Failed", describe(res)
    check_nodes(res, {"flip": FAILED, "on-success": OMITTED, "on-failure": ok("ok")})


def test_dag_phase_rules() -> None:
    """The pure reading of Argo's ``assessDAGPhase`` on small graphs."""
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    leaves = leaf_tasks(deps)
    assert leaves == ["d"]
    ends = {"a": TaskEnd("Succeeded"), "b": TaskEnd("Failed"), "c": TaskEnd("Succeeded")}
    assert dag_phase(leaves, deps, {**ends, "d": TaskEnd("Omitted")}) == ("Failed", ["d"])
    assert dag_phase(leaves, deps, {**ends, "d": TaskEnd("Succeeded")}) == ("Succeeded", [])
    # A target's continueOn for its phase keeps it from failing the DAG.
    lone = {"x": TaskEnd("Failed", continue_on=frozenset({"Failed"}))}
    assert dag_phase(["x"], {"x": []}, lone) == ("Succeeded", [])
    # A fanned-out task passes each item's phase on: one failed item fails an omitted leaf.
    fan = {"f": TaskEnd("Failed", ("Succeeded", "Failed")), "g": TaskEnd("Omitted")}
    assert dag_phase(["g"], {"f": [], "g": ["f"]}, fan) == ("Failed", ["g"])
    # Errors are kept as such; without failFast every target is read.
    two = {"p": TaskEnd("Error"), "q": TaskEnd("Failed")}
    assert dag_phase(["p", "q"], {"p": [], "q": []}, two, fail_fast=False) == (
        "Failed",
        ["p", "q"],
    )


def test_template_parallelism_counts_fanned_out_items(tmp_path: Path) -> None:
    """A DAG's ``parallelism: 2`` holds its task's four items to two at once."""
    res = run("loop_parallelism", tmp_path, None)
    assert res.phase == "Succeeded", describe(res)
    assert len(res.nodes) == 4 and most_at_once(stamped(res)) == 2, stamped(res)


# ---- no limit unless asked ----------------------------------------------------------------


def test_a_fan_out_runs_all_at_once_by_default(tmp_path: Path) -> None:
    """Six ``sleep 1`` items take about a second, as in Argo, not six."""
    started = time.monotonic()
    res = run("fanout_unbounded", tmp_path, None)
    took = time.monotonic() - started
    assert res.phase == "Succeeded" and len(res.nodes) == 6, describe(res)
    assert took < 4.0, f"{took:.1f}s: the items ran one after another"


def test_the_executor_has_no_limit_of_its_own_by_default(tmp_path: Path) -> None:
    """No ``parallelism``: only the workflow's caps the steps; a given one caps it too."""
    local = importlib.import_module("gangway.local")
    to_wf = importlib.import_module("gangway.local.workflow").workflow_from_template
    free = to_wf(compiled("parallelism_free"))
    assert local.LocalExecutor(free, tmp_path / "a").ctx.parallelism is None
    assert local.LocalExecutor(free, tmp_path / "b", parallelism=3).ctx.parallelism == 3
    one = to_wf(compiled("parallelism_one"))
    assert local.LocalExecutor(one, tmp_path / "c").ctx.parallelism == 1
    assert local.LocalExecutor(one, tmp_path / "d", parallelism=3).ctx.parallelism == 1


def test_steps_side_by_side_share_the_cores(tmp_path: Path) -> None:
    """Without a limit, each step's OpenMP pool is a share of the cores among the steps
    running when it starts: never 0, never more than the machine has."""
    with Workflow(name="omp-share", entrypoint="main") as w:
        show = sh("show", "sleep 0.2; echo $OMP_NUM_THREADS")
        with DAG(name="main"):
            for i in range(3):
                Task(name=f"t{i}", template=show)
    local = importlib.import_module("gangway.local")
    to_wf = importlib.import_module("gangway.local.workflow").workflow_from_template
    res = local.LocalExecutor(to_wf(dict(w.to_dict())), tmp_path).run()
    assert res.phase == "Succeeded", describe(res)
    for n in res.nodes:
        assert 1 <= int(n.result or "0") <= (os.cpu_count() or 1), describe(res)


def test_gangs_side_by_side_share_the_machine_s_processes(tmp_path: Path) -> None:
    """Two gangs of two processes each, on a machine that runs two: one after the other."""
    out = tmp_path / "spans"
    out.mkdir()
    code = (
        f"import os, time; s = time.time(); time.sleep(0.3 + 0.1 * (os.environ['RANK'] == '0'));"
        f" open(os.path.join({str(out)!r}, str(os.getpid())), 'w')"
        ".write(f'{s} {time.time()}')"
    )
    gang = _gang(code, pods=2, max_retry=0, policies=GANG_POLICIES)
    wt = workflow({"g": gang}, [{"name": "one", "template": "g"}, {"name": "two", "template": "g"}])
    local = importlib.import_module("gangway.local")
    to_wf = importlib.import_module("gangway.local.workflow").workflow_from_template
    ex: Any = local.LocalExecutor(to_wf(wt), tmp_path / "s")
    ex.ctx = dataclasses.replace(ex.ctx, gangs=Budget(2))
    res = ex.run()
    assert res.phase == "Succeeded", describe(res)
    spans = [stamp(p.read_text()) for p in out.iterdir()]
    assert len(spans) == 4 and most_at_once(spans) == 2, spans


def test_a_budget_lets_work_in_as_its_share_frees_up() -> None:
    """First come first served; asking for more than all of it gets all of it."""
    budget, order = Budget(4), []
    release = threading.Event()

    def take(units: int, name: str) -> None:
        with budget.held(units):
            order.append(name)
            if name == "first":
                release.wait(5)

    first = threading.Thread(target=take, args=(3, "first"))
    first.start()
    while not order:
        time.sleep(0.01)
    second = threading.Thread(target=take, args=(9, "second"))
    second.start()
    time.sleep(0.1)
    assert order == ["first"]
    release.set()
    first.join(5)
    second.join(5)
    assert order == ["first", "second"]
