"""Executing a compiled Workflow on this machine (see the package docstring).

:meth:`LocalExecutor.run` reads as the steps it takes over a :class:`_Dag` (the run state):

1. take the next task whose dependencies have ended (none left, or the run failed: stop);
2. skip it when its dependencies did not end as its ``depends`` requires (Omitted), or when
   its ``when`` is false (Skipped);
3. run it — once, or once per ``withItems``/``withParam`` item, side by side up to the
   parallelism — each node with the retries its ``retryStrategy`` allows
   (:func:`gangway.retries.next_retry`), each attempt by the runner of its template's kind
   (:mod:`~gangway.local._container`, :mod:`~gangway.local._resource`);
4. what never ran is Omitted, with why;
5. the workflow's exit handler (``spec.onExit``) runs, with ``workflow.status`` and
   ``workflow.failures`` (not after an interrupt: nothing new starts then); no process
   outlives the run;
6. the :class:`RunResult` says what happened — a failing step or an error found mid-run is a
   result, never an exception.

What the executor cannot run is refused before anything runs (:mod:`gangway.local.validation`).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangway.argo.errors import UnsupportedConstruct
from gangway.argo.expressions import evaluate
from gangway.argo.scope import (
    inputs_scope,
    item_scope,
    parameter_values,
    task_outputs_scope,
    workflow_scope,
)
from gangway.argo.substitution import substitute
from gangway.contract import ENV_LOCAL_RUN
from gangway.errors import GangwayError
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._cache import NodeCache
from gangway.local._clock import SYSTEM_CLOCK, Clock
from gangway.local._container import run_container
from gangway.local._inputs import task_items, template_inputs
from gangway.local._model import NodeResult, Outcome, RunResult
from gangway.local._processes import ProcessGroups
from gangway.local._resource import run_resource
from gangway.local.validation import check_supported, task_dependencies
from gangway.retries import LastAttempt, next_retry

__all__ = ["LocalExecutor"]

_RUNNERS: dict[str, Callable[[Attempt, RunContext], Outcome]] = {
    "container": run_container,
    "script": run_container,
    "resource": run_resource,
}
"""The runner of each template kind a node can run."""


@dataclass
class _Dag:
    """The run state: the entrypoint DAG's tasks and how far they got."""

    tasks: dict[str, Mapping[str, Any]]
    deps: dict[str, dict[str, set[str]]]
    pending: list[str]
    phases: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(
            p not in ("Succeeded", "Skipped", "Omitted") for p in self.phases.values()
        )


class LocalExecutor:
    """Runs one compiled Workflow; construct (which validates it), then call :meth:`run`."""

    def __init__(
        self,
        workflow: Mapping[str, Any],
        state_dir: Path,
        *,
        on_event: Callable[[NodeResult], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        parallelism: int | None = None,
        env: Mapping[str, str] | None = None,
        previous: Mapping[str, NodeResult] | None = None,
        grace: float = 30.0,
        use_cache: bool = True,
    ) -> None:
        """``previous``: the nodes of an earlier run of this workflow (``gangway retry``); those
        that succeeded are not run again, their recorded outputs are used. ``grace``: seconds
        between SIGTERM and SIGKILL when a step, a gang pod or the whole run is stopped.
        ``use_cache``: a ``memoize`` step whose key has an entry younger than its ``maxAge``
        in ``state_dir/cache`` is not run, as Argo does (:mod:`gangway.local._cache`);
        without it every step runs (and refreshes its entry)."""
        check_supported(workflow)
        self.wf = workflow
        self.spec: dict[str, Any] = dict(workflow["spec"])
        self.name = str(workflow["metadata"]["name"])
        self.uid = str(workflow["metadata"]["uid"])
        self.root = state_dir.resolve() / "runs" / self.name
        self.cache = NodeCache(state_dir.resolve(), self.name, enabled=use_cache)
        self.on_event = on_event or (lambda n: None)
        self.clock = clock
        self.templates = {t["name"]: t for t in self.spec.get("templates", [])}
        self.params = parameter_values(self.spec)
        self.nodes: list[NodeResult] = []
        self.previous = {n: r for n, r in (previous or {}).items() if r.phase == "Succeeded"}
        self.procs = ProcessGroups(f"{self.uid}.{secrets.token_hex(3)}")
        self._status: dict[str, str] = {}
        """``workflow.status`` and ``workflow.failures``, once the DAG has ended."""
        self._lock = threading.Lock()
        self.ctx = RunContext(
            procs=self.procs,
            env={**os.environ, **(env or {}), ENV_LOCAL_RUN: "1"},
            # Fanned-out items run one at a time unless asked: on a small machine, CPU-bound
            # steps side by side only contend for the same cores.
            parallelism=max(1, int(parallelism or self.spec.get("parallelism") or 1)),
            grace=grace,
            clock=clock,
            progress=self._event,
        )

    def interrupt(self, sig: int) -> None:
        """Stop the run (SIGINT/SIGTERM to ``gangway run``): SIGTERM every running step and gang
        pod, SIGKILL what is left after the grace period; start nothing new. Safe to call from a
        signal handler; a second call kills at once."""
        self.procs.stop(sig, self.ctx.grace)

    def run(self) -> RunResult:
        """Run the DAG to its end (or until interrupted). Never raises for a failing step or a
        construct found unsupported mid-run: the result says what happened."""
        t0 = self.clock.now()
        dag = self._plan()
        while (name := self._next(dag)) is not None:  # 1.
            task = dag.tasks[name]
            if not all(dag.phases[d] in ok for d, ok in dag.deps[name].items()):  # 2.
                dag.phases[name] = self._omit(task, "a dependency did not end as required").phase
                continue
            dag.phases[name] = self._guarded(dag, task)  # 3.
        why = "not run: the workflow failed first"  # 4.
        if self.procs.stopping is not None:
            why = f"not run: interrupted ({signal.Signals(self.procs.stopping).name})"
        for name in dag.pending:
            self._omit(dag.tasks[name], why)
        exit_ok = self._exit_handler(dag)  # 5.
        survivors = self.procs.close()
        stopped = self.procs.stopping is not None
        return RunResult(  # 6.
            self.name,
            self.uid,
            "Failed" if dag.failed or stopped or not exit_ok else "Succeeded",
            self.nodes,
            dict(self.params),
            self.root,
            round(self.clock.now() - t0, 2),
            interrupted=self.procs.stopping,
            error=dag.error,
            survivors=survivors,
        )

    # ---- the DAG -------------------------------------------------------------------------

    def _plan(self) -> _Dag:
        tasks = self.templates[self.spec["entrypoint"]]["dag"].get("tasks", [])
        return _Dag(
            tasks={t["name"]: t for t in tasks},
            deps={t["name"]: task_dependencies(t) for t in tasks},
            pending=[t["name"] for t in tasks],
        )

    def _next(self, dag: _Dag) -> str | None:
        """The next task to run: the first pending one whose dependencies have all ended."""
        if not dag.pending or dag.failed or self.procs.stopping is not None:
            return None
        ready = [n for n in dag.pending if all(d in dag.phases for d in dag.deps[n])]
        if not ready:
            dag.error = f"tasks {dag.pending} can never run (a dependency cycle?)"
            return None
        dag.pending.remove(ready[0])
        return ready[0]

    def _guarded(self, dag: _Dag, task: Mapping[str, Any]) -> str:
        """Run ``task``; an error found only now (an unknown variable, a manifest a value
        would rewrite) ends the run with it named."""
        try:
            return self._run_task(dag, task)
        except BaseException as e:
            if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: no survivors
                self.procs.kill_all()
                raise
            dag.error = str(e) if isinstance(e, GangwayError) else self._internal(e)
            name = str(task["name"])
            self._record(NodeResult(name, name, str(task["template"]), "Error", message=dag.error))
            return "Error"

    def _internal(self, e: Exception) -> str:
        """An unexpected error: the traceback goes to a file, the run ends with one line."""
        import traceback

        path = self.root / "executor-error.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(e)))
        return f"internal error: {type(e).__name__}: {e} (traceback in {path})"

    def _run_task(self, dag: _Dag, task: Mapping[str, Any]) -> str:
        name = str(task["name"])
        scope = {**self._workflow_scope(), **task_outputs_scope(dag.outputs)}
        if "when" in task:
            cond = substitute(str(task["when"]), scope, where=f"task {name}.when")
            if not evaluate(cond, {}):
                skipped = NodeResult(name, name, task["template"], "Skipped")
                skipped.message = f"when: {cond} is false"
                self._record(skipped)
                return "Skipped"
        items = task_items(task, scope)
        if items is None:
            node = self._run_node(task, name, scope)
            dag.outputs[name] = node.outputs
            return node.phase

        def one(i: int, item: Any) -> NodeResult:
            label = item if isinstance(item, str | int | float) else i
            node_name = f"{name}({i}:{label})"
            if self.procs.stopping is not None:
                return self._omit(task, "not run: interrupted", node_name)
            return self._run_node(task, node_name, {**scope, **item_scope(item)})

        # Fanned-out items run side by side (as Argo runs them) up to the parallelism limit.
        with ThreadPoolExecutor(max_workers=self.ctx.parallelism) as pool:
            results = list(pool.map(one, range(len(items)), items))
        keys = {k for r in results for k in r.outputs}
        dag.outputs[name] = {k: json.dumps([r.outputs.get(k) for r in results]) for k in keys}
        ok = len(results) == len(items) and all(r.phase == "Succeeded" for r in results)
        return "Succeeded" if ok else "Failed"

    def _workflow_scope(self) -> dict[str, str]:
        scope = workflow_scope(
            name=self.name,
            uid=self.uid,
            namespace="local",
            parameters=self.params,
            labels=self.wf["metadata"].get("labels") or {},
            service_account=str(self.spec.get("serviceAccountName", "")),
        )
        return {**scope, **self._status}

    def _exit_handler(self, dag: _Dag) -> bool:
        """Run ``spec.onExit`` as Argo does once the DAG has ended (node ``NAME.onExit``);
        False when it did not succeed (the workflow then fails)."""
        template = self.spec.get("onExit")
        if not template:
            return True
        task = {"name": f"{self.name}.onExit", "template": template}
        if self.procs.stopping is not None:
            self._omit(task, "not run: interrupted")
            return True
        failures = [
            {
                "displayName": n.name,
                "message": n.message,
                "templateName": n.template,
                "phase": n.phase,
            }
            for n in self.nodes
            if n.phase in ("Failed", "Error")
        ]
        status = "Error" if dag.error else "Failed" if dag.failed else "Succeeded"
        self._status = {"workflow.status": status, "workflow.failures": json.dumps(failures)}
        return self._guarded(dag, task) == "Succeeded"

    # ---- one node, with retries ----------------------------------------------------------

    def _run_node(
        self, task: Mapping[str, Any], node_name: str, scope: Mapping[str, str]
    ) -> NodeResult:
        template = self.templates[task["template"]]
        if node_name in self.previous:  # `gangway retry`: done before, keep what it produced
            return self._kept(node_name, self.previous[node_name])
        node = NodeResult(node_name, str(task["name"]), str(template["name"]), phase="Running")
        tscope = {
            **self._workflow_scope(),
            **inputs_scope(template_inputs(task, template, scope, node)),
        }
        key = self.cache.key(template, tscope, node)
        if key is not None and self.cache.hit(node, key):
            self._record(node)
            return node
        note = node.message  # why the cache was not used, if it says
        strategy = dict(template.get("retryStrategy") or {})
        limit = substitute(str(strategy.get("limit", 0)), tscope, where="retryStrategy.limit")
        strategy["limit"] = int(limit)
        started = self.clock.now()
        self._event(node)
        while True:
            node.attempts += 1
            outcome = self._attempt(template, tscope, node)
            node.exit_code, node.message = outcome.exit_code, outcome.message
            node.outputs, status = outcome.outputs, outcome.status
            if status == "Succeeded":
                break
            if self.procs.stopping is not None:
                status = "Failed"
                stop = signal.Signals(self.procs.stopping).name
                node.message = f"stopped: interrupted ({stop}); {outcome.message}"
                break
            last = LastAttempt(outcome.status, outcome.exit_code, outcome.message)
            delay = next_retry(
                strategy, last, retries_done=node.attempts - 1, elapsed=self.clock.now() - started
            )
            if delay is None:
                break
            node.message = f"{outcome.message}; retry {node.attempts} in {delay:.0f}s"
            self._event(node)
            self.clock.sleep(delay)
        node.phase = status
        node.seconds = round(self.clock.now() - started, 2)
        if note:
            node.message = f"{note}; {node.message}" if node.message else note
        if key is not None and status == "Succeeded":
            self.cache.save(node, key)
        self._record(node)
        return node

    def _kept(self, node_name: str, done: NodeResult) -> NodeResult:
        kept = NodeResult(node_name, done.task, done.template, "Succeeded", done.attempts)
        kept.outputs, kept.log = dict(done.outputs), done.log
        kept.message = "succeeded before the retry: outputs reused"
        self._record(kept)
        return kept

    def _attempt(
        self, template: Mapping[str, Any], scope: Mapping[str, str], node: NodeResult
    ) -> Outcome:
        scratch = self.root / "steps" / safe_name(node.name) / f"attempt-{node.attempts}"
        scratch.mkdir(parents=True, exist_ok=True)
        log_dir = self.root / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        kind = next((k for k in _RUNNERS if k in template), None)
        if kind is None:
            raise UnsupportedConstruct(
                f"template {template['name']}: no container, script or resource to run"
            )
        return _RUNNERS[kind](Attempt(template, scope, node, scratch, log_dir), self.ctx)

    # ---- events --------------------------------------------------------------------------

    def _omit(self, task: Mapping[str, Any], why: str, node: str | None = None) -> NodeResult:
        name = str(task["name"])
        result = NodeResult(node or name, name, str(task["template"]), "Omitted", message=why)
        self._record(result)
        return result

    def _record(self, node: NodeResult) -> None:
        """A node ended: keep it and tell the listener."""
        with self._lock:
            self.nodes.append(node)
            self.on_event(node)

    def _event(self, node: NodeResult) -> None:
        """A running node has news."""
        with self._lock:
            self.on_event(node)
