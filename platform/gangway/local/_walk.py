"""Running one template at one node, whatever its kind — the recursion of a local run.

:meth:`Walker.call` is what a DAG task or a step does: fill its template's inputs from the
caller's scope, then :meth:`Walker.execute` the template at the node:

* ``dag`` / ``steps``: their children (:mod:`._dag`, :mod:`._steps`), retried whole by the
  template's ``retryStrategy``; their outputs from their children's;
* ``suspend``: wait (:mod:`._suspend`);
* a ``daemon``: started, ready, left running until its caller's template ends;
* a leaf (``container``, ``script``, ``containerSet``, ``resource``): run, each attempt
  holding one of the run's slots (its parallelism), retried by its ``retryStrategy``
  (:func:`gangway.argo.retries.next_retry`), or not run at all when an earlier run or a verified
  cache entry already has its outputs.

An error found only at run time (an unknown variable, a missing secret) becomes an ``Error``
node and ends the run with the error named (:attr:`Walker.error`), never an exception.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gangway.argo.nodes import argo_node_name, pod_name
from gangway.argo.retries import LastAttempt, next_retry
from gangway.argo.scope import POD_TEMPLATE_TYPES, inputs_scope, skipped_outputs
from gangway.errors import GangwayError, PermanentError, TransientError, UnsupportedConstruct
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._cache import NodeCache
from gangway.local._clock import Clock
from gangway.local._container import run_container, run_container_set, start_daemon
from gangway.local._inputs import artifact_references, template_artifacts, template_inputs
from gangway.local._processes import ProcessGroups
from gangway.local._resource import run_resource
from gangway.local._results import NodeResult, Outcome
from gangway.local._retry import attempt_scope, retry_limit
from gangway.local.validation import with_defaults

__all__ = ["MAX_DEPTH", "Slots", "Walker"]

MAX_DEPTH = 64
"""How deep templates may call templates (recursion included) before the run is stopped."""

_RUNNERS: dict[str, Callable[[Attempt, RunContext], Outcome]] = {
    "container": run_container,
    "script": run_container,
    "containerSet": run_container_set,
    "resource": run_resource,
}
"""The runner of each leaf template kind."""


class Slots:
    """The run's parallelism: at most ``n`` leaf attempts at once (None: no limit), first
    come first served."""

    def __init__(self, n: int | None) -> None:
        self.n = None if n is None else max(1, n)
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()
        self._used = 0

    @property
    def busy(self) -> int:
        """Leaf attempts holding a slot now."""
        return self._used

    @contextmanager
    def held(self) -> Iterator[None]:
        me = object()
        with self._cv:
            self._queue.append(me)
            while self._queue[0] is not me or (self.n is not None and self._used >= self.n):
                self._cv.wait()
            self._queue.popleft()
            self._used += 1
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                self._used -= 1
                self._cv.notify_all()


class Walker:
    """The recursion over templates; :class:`gangway.local.LocalExecutor` provides the run's
    state (these attributes) and the recording of nodes."""

    templates: dict[str, Mapping[str, Any]]
    spec: dict[str, Any]
    ctx: RunContext
    procs: ProcessGroups
    clock: Clock
    cache: NodeCache
    previous: dict[str, NodeResult]
    root: Path
    slots: Slots
    globals: dict[str, str]
    """``workflow.outputs.parameters.*`` / ``.artifacts.*`` published so far."""
    daemons: list[tuple[str, subprocess.Popen[bytes]]]
    error: str
    error_retryable: bool
    auto_resume: bool
    stop_reason: str = ""
    """Why the run is stopping when it is not an interrupt (the workflow's deadline)."""

    def workflow_vars(self) -> dict[str, str]:
        raise NotImplementedError

    def record(self, node: NodeResult) -> None:
        raise NotImplementedError

    def event(self, node: NodeResult) -> None:
        raise NotImplementedError

    def internal(self, e: Exception) -> str:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self.procs.stopping is not None or bool(self.error)

    # ---- a call ---------------------------------------------------------------------------

    def template_of(self, task: Mapping[str, Any]) -> Mapping[str, Any]:
        """The template ``task`` runs: a named one, or its inline one with the workflow's
        ``templateDefaults`` (and ``retryStrategy``) merged under it, as Argo runs both."""
        if task.get("inline"):
            inline = {"name": f"{task['name']}-inline", **task["inline"]}
            return with_defaults({**self.spec, "templates": [inline]})[0]
        return self.templates[str(task["template"])]

    def argo_name(self, node_name: str, depth: int) -> str:
        """The full name Argo gives node ``node_name`` (``{{node.name}}``): the entrypoint's
        node is the workflow's name."""
        workflow = self.ctx.workflow
        if depth == 0 and not node_name.startswith(f"{workflow}."):
            return workflow
        return argo_node_name(workflow, node_name)

    def call(
        self,
        task: Mapping[str, Any],
        node_name: str,
        scope: Mapping[str, str],
        depth: int,
        kind: str | None = None,
    ) -> NodeResult:
        """Run ``task``'s template at ``node_name`` (``kind``: "tasks" for a DAG task, "steps"
        for a step, None for the entrypoint, a handler or a hook); an error becomes an Error
        node that ends the run."""
        template = self.template_of(task)
        try:
            inputs = template_inputs(task, template, scope, node_name)
            arts = template_artifacts(task, template, scope, node_name)
            tscope = {
                **self.workflow_vars(),
                **inputs_scope(inputs),
                **artifact_references(arts),
                "node.name": self.argo_name(node_name, depth),
            }
            if kind is not None:  # Argo: the calling task's or step's own name
                tscope[f"{kind}.name"] = str(task["name"])
            return self.execute(template, tscope, node_name, str(task["name"]), depth + 1, arts)
        except Exception as e:
            return self.failed(node_name, task, e)

    def omit(self, node_name: str, task: Mapping[str, Any], why: str) -> NodeResult:
        """Record ``task`` as not run at ``node_name`` (Omitted), saying why."""
        template = str(task.get("template") or f"{task.get('name')}-inline")
        node = NodeResult(node_name, str(task["name"]), template, "Omitted", message=why)
        node.outputs = self.skipped_outputs(task)
        self.record(node)
        return node

    def skipped_outputs(self, task: Mapping[str, Any]) -> dict[str, str]:
        """The outputs ``task`` has once Skipped or Omitted: its template's defaults."""
        try:
            return skipped_outputs(self.template_of(task))
        except KeyError:  # a handler that names no template: refused up front
            return {}

    def failed(self, node_name: str, task: Mapping[str, Any], e: Exception) -> NodeResult:
        """The Error node of an error found at run time, which ends the run with it named."""
        if not self.error:
            self.error = str(e) if isinstance(e, GangwayError) else self.internal(e)
            self.error_retryable = isinstance(e, TransientError)
        template = str(task.get("template") or f"{task.get('name')}-inline")
        node = NodeResult(node_name, str(task["name"]), template, "Error", message=str(e))
        if not isinstance(e, GangwayError):
            node.message = self.error
        self.record(node)
        return node

    def execute(
        self,
        template: Mapping[str, Any],
        scope: Mapping[str, str],
        node_name: str,
        task: str,
        depth: int,
        arts: Mapping[str, tuple[str, str]],
    ) -> NodeResult:
        if depth > MAX_DEPTH:
            raise PermanentError(
                f"node {node_name}: templates call templates more than {MAX_DEPTH} deep "
                "(a recursion whose `when` never stops it?)"
            )
        if "dag" in template or "steps" in template:
            from gangway.local._composite import run_composite

            return run_composite(self, template, scope, node_name, task, depth)
        if "suspend" in template:
            from gangway.local._suspend import run_suspend

            return run_suspend(self, template, scope, NodeResult(node_name, task, template["name"]))
        return self.leaf(template, scope, node_name, task, arts)

    # ---- a leaf ---------------------------------------------------------------------------

    def leaf(
        self,
        template: Mapping[str, Any],
        tscope: Mapping[str, str],
        node_name: str,
        task: str,
        arts: Mapping[str, tuple[str, str]],
    ) -> NodeResult:
        # `gangway retry`: done before, keep what it produced (a daemon starts again: what it
        # served ended with the earlier attempt)
        if node_name in self.previous and not template.get("daemon"):
            return self._kept(node_name, self.previous[node_name])
        node = NodeResult(node_name, task, str(template["name"]), phase="Running")
        key = self.cache.key(template, tscope, node)
        if key is not None and self.cache.hit(node, key):
            self.record(node)
            return node
        note = node.message  # why the cache was not used, if it says
        limit = retry_limit(template, tscope, f"template {template['name']}")
        started = self.clock.now()
        node.message = "; ".join(m for m in (note, limit.notice) if m)
        self.event(node)
        last: LastAttempt | None = None
        while True:
            node.attempts += 1
            began = self.clock.now()
            scope = {**tscope, **self._attempt_vars(template, tscope, node, last)}
            outcome = self._attempt(template, scope, node, arts)
            node.exit_code, node.message = outcome.exit_code, outcome.message
            node.outputs, node.result = outcome.outputs, outcome.result
            node.artifacts, node.daemoned = outcome.artifacts, outcome.daemoned
            status = outcome.status
            if status == "Succeeded":
                break
            if self.procs.stopping is not None:
                status = "Failed"
                stop = signal.Signals(self.procs.stopping).name
                why = self.stop_reason or f"interrupted ({stop})"
                node.message = f"stopped: {why}"
                break
            last = LastAttempt(
                outcome.status, outcome.exit_code, outcome.message, self.clock.now() - began
            )
            done = node.attempts - 1
            delay = next_retry(
                limit.strategy, last, retries_done=done, elapsed=self.clock.now() - started
            )
            if delay is None:
                node.message = "; ".join(m for m in (node.message, limit.stopped(done)) if m)
                break
            node.message = f"{outcome.message}; retry {node.attempts} in {delay:.0f}s"
            self.event(node)
            self.clock.sleep(delay)
        node.phase = status
        node.seconds = round(self.clock.now() - started, 2)
        if note:
            node.message = f"{note}; {node.message}" if node.message else note
        if key is not None and status == "Succeeded":
            self.cache.save(node, key)
        self.publish(template, node)
        self.record(node)
        return node

    def _attempt_vars(
        self,
        template: Mapping[str, Any],
        tscope: Mapping[str, str],
        node: NodeResult,
        last: LastAttempt | None,
    ) -> dict[str, str]:
        """What Argo gives this attempt: ``retries`` and ``lastRetry.*`` (a template with a
        retryStrategy), and ``pod.name`` (a template that runs in a pod; a retried one's pod is
        its attempt's, ``NODE(N)``; an inline template's pod is named without a template)."""
        scope = attempt_scope(template, node.attempts - 1, last)
        if any(k in template for k in POD_TEMPLATE_TYPES):
            argo = tscope["node.name"]
            if template.get("retryStrategy") is not None:
                argo = f"{argo}({node.attempts - 1})"
            named = self.templates.get(str(template["name"])) is template
            scope["pod.name"] = pod_name(self.ctx.workflow, argo, template["name"] if named else "")
        return scope

    def _kept(self, node_name: str, done: NodeResult) -> NodeResult:
        kept = NodeResult(node_name, done.task, done.template, "Succeeded", done.attempts)
        kept.outputs, kept.log = dict(done.outputs), done.log
        kept.result, kept.artifacts = done.result, dict(done.artifacts)
        kept.message = "succeeded before the retry: outputs reused"
        self.publish(self.templates.get(done.template) or {}, kept)
        self.record(kept)
        return kept

    def _attempt(
        self,
        template: Mapping[str, Any],
        scope: Mapping[str, str],
        node: NodeResult,
        arts: Mapping[str, tuple[str, str]],
    ) -> Outcome:
        scratch = self.root / "steps" / safe_name(node.name) / f"attempt-{node.attempts}"
        scratch.mkdir(parents=True, exist_ok=True)
        log_dir = self.root / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        a = Attempt(template, scope, node, scratch, log_dir, arts)
        if template.get("daemon"):
            outcome, proc = start_daemon(a, self.ctx)
            if proc is not None:
                self.daemons.append((node.name, proc))
            return outcome
        kind = next((k for k in _RUNNERS if k in template), None)
        if kind is None:
            raise UnsupportedConstruct(f"template {template['name']}: nothing to run")
        with self.slots.held():
            if self.procs.stopping is not None:
                return Outcome("Failed", None, "not started: the run is stopping")
            return _RUNNERS[kind](a, self.ctx)

    def publish(self, template: Mapping[str, Any], node: NodeResult) -> None:
        """Outputs with a ``globalName`` become ``workflow.outputs.*``."""
        if node.phase != "Succeeded":
            return
        outputs = template.get("outputs") or {}
        for p in outputs.get("parameters") or []:
            if p.get("globalName") and p["name"] in node.outputs:
                self.globals[f"workflow.outputs.parameters.{p['globalName']}"] = node.outputs[
                    p["name"]
                ]
        for a in outputs.get("artifacts") or []:
            if a.get("globalName") and a["name"] in node.artifacts:
                self.globals[f"workflow.outputs.artifacts.{a['globalName']}"] = node.artifacts[
                    a["name"]
                ]

    def stop_daemons(self, prefix: str) -> None:
        """Stop the daemons started under node ``prefix`` (all of them for ``""``): their
        caller's template has ended."""
        for name, proc in list(self.daemons):
            if not prefix or name.startswith(prefix + ".") or name.startswith(prefix + "["):
                self.procs.kill(proc)
                self.daemons.remove((name, proc))
