"""Executing a compiled Workflow on this machine (see the package docstring).

:meth:`LocalExecutor.run` reads as the steps it takes:

1. the workflow's ``activeDeadlineSeconds`` starts counting;
2. the entrypoint — any kind of template — runs at the top node (:mod:`._walk`: DAGs and
   steps recursively, leaves as processes, each with its retries), with the workflow's
   arguments;
3. daemons still running are stopped;
4. the exit handler (``spec.onExit``, or ``hooks.exit``) runs with ``workflow.status`` and
   ``workflow.failures``, and each workflow hook whose expression then holds (not after an
   interrupt: nothing new starts then); no process outlives the run;
5. the :class:`RunResult` says what happened — a failing step or an error found mid-run is a
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
from pathlib import Path
from typing import Any

from gangway.argo.expressions import evaluate
from gangway.argo.scope import parameter_values, workflow_scope
from gangway.argo.substitution import substitute
from gangway.contract import ENV_LOCAL_RUN, ENV_METRICS_DIR
from gangway.local._artifacts import ArtifactStore
from gangway.local._attempt import RunContext
from gangway.local._boundary import Budget
from gangway.local._cache import NodeCache
from gangway.local._clock import SYSTEM_CLOCK, Clock
from gangway.local._env import Secrets
from gangway.local._gang import max_local_pods
from gangway.local._processes import ProcessGroups
from gangway.local._results import NodeResult, RunResult
from gangway.local._suspend import clear_resumes, executing
from gangway.local._walk import Slots, Walker
from gangway.local.validation import check_supported, with_defaults

__all__ = ["LocalExecutor"]


class LocalExecutor(Walker):
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
        auto_resume: bool = False,
        secrets_dir: Path | None = None,
    ) -> None:
        """``parallelism``: at most this many leaf steps at once (None: no limit but the
        workflow's own ``spec.parallelism``, as on a cluster; a gang of processes takes its
        share of this machine, :func:`gangway.local._gang.max_local_pods`, either way).
        ``previous``: the nodes of an earlier run of this workflow (``gangway retry``); those
        that succeeded are not run again, their recorded outputs are used. ``grace``: seconds
        between SIGTERM and SIGKILL when a step, a gang pod or the whole run is stopped.
        ``use_cache``: a ``memoize`` step whose key has an entry younger than its ``maxAge``
        in ``state_dir/cache`` is not run, as Argo does (:mod:`gangway.local._cache`);
        without it every step runs (and refreshes its entry). ``auto_resume``: a ``suspend``
        without a duration goes on at once. ``secrets_dir``: where secrets are
        (``NAME/KEY`` files; :mod:`gangway.local._env`)."""
        environ = {**os.environ, **(env or {})}
        self.secrets = Secrets(secrets_dir, environ)
        check_supported(workflow, self.secrets)
        self.wf = workflow
        self.spec: dict[str, Any] = dict(workflow["spec"])
        self.name = str(workflow["metadata"]["name"])
        self.uid = str(workflow["metadata"]["uid"])
        self.root = state_dir.resolve() / "runs" / self.name
        self.metrics_dir = self.root / "metrics"
        """Every step's Prometheus samples (:mod:`gangway.step.metrics`): what ``gangway run
        --metrics-port`` serves and the live table reads progress from."""
        self.cache = NodeCache(state_dir.resolve(), self.name, enabled=use_cache)
        self.on_event = on_event or (lambda n: None)
        self.clock = clock
        self.templates = {t["name"]: t for t in with_defaults(self.spec)}
        self.params = parameter_values(self.spec)
        self.nodes: list[NodeResult] = []
        self.previous = {n: r for n, r in (previous or {}).items() if r.phase == "Succeeded"}
        self.procs = ProcessGroups(f"{self.uid}.{secrets.token_hex(3)}")
        self.globals: dict[str, str] = {}
        self.daemons = []
        self.error = ""
        self.error_retryable = False
        self.auto_resume = auto_resume
        self._status: dict[str, str] = {}
        """``workflow.status`` and ``workflow.failures``, once the entrypoint has ended."""
        self._lock = threading.RLock()
        self._deadline_hit = False
        self._t0 = clock.now()
        self._started = _utc_now()
        # As Argo, every ready step runs at once unless the workflow's parallelism (or, for
        # this machine, ``parallelism``) caps the leaf steps running side by side.
        caps = [int(c) for c in (parallelism, self.spec.get("parallelism")) if c]
        self.slots = Slots(min(caps) if caps else None)
        self.ctx = RunContext(
            procs=self.procs,
            env={**environ, ENV_LOCAL_RUN: "1", ENV_METRICS_DIR: str(self.metrics_dir)},
            parallelism=self.slots.n,
            busy=lambda: self.slots.busy,
            gangs=Budget(max_local_pods()),
            grace=grace,
            clock=clock,
            progress=self.event,
            workflow=self.name,
            secrets=self.secrets,
            artifacts=ArtifactStore(self._artifact_root(state_dir)),
            volume_root=self.root / "volumes",
            claims=tuple(
                str((c.get("metadata") or {}).get("name"))
                for c in self.spec.get("volumeClaimTemplates") or []
            ),
            pod_volumes=tuple(self.spec.get("volumes") or []),
        )

    def _artifact_root(self, state_dir: Path) -> str:
        root = self.params.get("storage-root")
        if root:
            return f"{root.rstrip('/')}/artifacts"
        return (state_dir.resolve() / "artifacts").as_uri()

    def interrupt(self, sig: int) -> None:
        """Stop the run (SIGINT/SIGTERM to ``gangway run``): SIGTERM every running step and gang
        pod, SIGKILL what is left after the grace period; start nothing new. Safe to call from a
        signal handler; a second call kills at once."""
        self.procs.stop(sig, self.ctx.grace)

    def run(self) -> RunResult:
        """Run the workflow to its end (or until interrupted). Never raises for a failing step
        or a construct found unsupported mid-run: the result says what happened."""
        with executing(self.root):
            return self._run()

    def _run(self) -> RunResult:
        t0 = self._t0 = self.clock.now()
        clear_resumes(self.root)
        timer = self._deadline()  # 1.
        template = self.templates[self.spec["entrypoint"]]
        # The entrypoint's inputs are the workflow's arguments, by name (as Argo fills them).
        declared = {p.get("name") for p in (template.get("inputs") or {}).get("parameters") or []}
        args = self.spec.get("arguments") or {}
        entry = {
            "name": template["name"],
            "template": template["name"],
            "arguments": {
                "parameters": [
                    {"name": k, "value": v} for k, v in self.params.items() if k in declared
                ],
                "artifacts": list(args.get("artifacts") or []),
            },
        }
        # A DAG's or steps' children are the top nodes (``task``, ``[0].step``); a lone leaf
        # is one node named after its template.
        top_name = "" if "dag" in template or "steps" in template else str(template["name"])
        try:
            top = self.call(entry, top_name, self.workflow_vars(), 0)  # 2.
        except BaseException:  # KeyboardInterrupt, SystemExit: no survivors
            self.procs.kill_all()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self.stop_daemons("")  # 3.
        if self._deadline_hit:  # Argo runs the exit handler after the deadline, too
            self.procs.reset()
        exit_ok = self._exit_handlers(top)  # 4.
        survivors = self.procs.close()
        stopped = self.procs.stopping is not None or self._deadline_hit
        if self._deadline_hit:
            self.error = self.error or f"{self.stop_reason}: stopped"
        failed = top.phase != "Succeeded" or stopped or not exit_ok or bool(self.error)
        return RunResult(  # 5.
            self.name,
            self.uid,
            "Failed" if failed else "Succeeded",
            self.nodes,
            dict(self.params),
            self.root,
            round(self.clock.now() - t0, 2),
            interrupted=None if self._deadline_hit else self.procs.stopping,
            error=self.error,
            error_retryable=self.error_retryable,
            survivors=survivors,
            outputs={
                k.removeprefix("workflow.outputs.parameters."): v
                for k, v in self.globals.items()
                if k.startswith("workflow.outputs.parameters.")
            },
        )

    def _deadline(self) -> threading.Timer | None:
        seconds = self.spec.get("activeDeadlineSeconds")
        if not seconds:
            return None

        def hit() -> None:
            self._deadline_hit = True
            self.stop_reason = (
                f"the workflow ran longer than its activeDeadlineSeconds ({seconds}s)"
            )
            self.procs.stop(signal.SIGTERM, self.ctx.grace)

        timer = threading.Timer(float(seconds), hit)
        timer.daemon = True
        timer.start()
        return timer

    def workflow_vars(self) -> dict[str, str]:
        scope = workflow_scope(
            name=self.name,
            uid=self.uid,
            namespace="local",
            parameters=self.params,
            labels=self.wf["metadata"].get("labels") or {},
            service_account=str(self.spec.get("serviceAccountName", "")),
        )
        annotations = self.wf["metadata"].get("annotations") or {}
        scope.update({f"workflow.annotations.{k}": str(v) for k, v in annotations.items()})
        scope["workflow.mainEntrypoint"] = str(self.spec.get("entrypoint", ""))
        scope["workflow.creationTimestamp"] = self._created
        scope["workflow.scheduledTime"] = self._created  # a cron's run, once, now
        scope["workflow.duration"] = f"{self.clock.now() - self._t0:.6f}"
        scope["workflow.priority"] = str(self.spec.get("priority", 0))
        return {**scope, **self.globals, **self._status}

    @property
    def _created(self) -> str:
        meta = self.wf["metadata"]
        return str(meta.get("creationTimestamp") or self._started)

    def _exit_handlers(self, top: NodeResult) -> bool:
        """Run ``spec.onExit`` (or ``hooks.exit``) as Argo does once the entrypoint has ended
        (node ``NAME.onExit``), and each workflow hook whose expression holds; False when one
        did not succeed (the workflow then fails)."""
        hooks = dict(self.spec.get("hooks") or {})
        handlers: list[tuple[str, Mapping[str, Any]]] = []
        if self.spec.get("onExit"):
            handlers.append(("onExit", {"template": self.spec["onExit"]}))
        elif "exit" in hooks:
            handlers.append(("onExit", hooks.pop("exit")))
        if not handlers and not hooks:
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
        status = "Error" if self.error else "Succeeded" if top.phase == "Succeeded" else "Failed"
        self._status = {"workflow.status": status, "workflow.failures": json.dumps(failures)}
        scope = self.workflow_vars()
        for name, spec in hooks.items():
            if name != "exit" and spec.get("expression"):
                text = substitute(str(spec["expression"]), scope, where=f"hooks.{name}")
                if evaluate(text, scope, bare_strings=True) is True:
                    handlers.append((f"hooks.{name}", spec))
        ok = True
        for label, spec in handlers:
            task = {"name": f"{self.name}.{label}", **spec}
            if self.procs.stopping is not None:
                self.omit(task["name"], task, "not run: interrupted")
                continue
            ok = self.call(task, task["name"], scope, 0).phase == "Succeeded" and ok
        return ok

    def internal(self, e: Exception) -> str:
        """An unexpected error: the traceback goes to a file, the run ends with one line."""
        import traceback

        path = self.root / "executor-error.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(e)))
        return f"internal error: {type(e).__name__}: {e} (traceback in {path})"

    def record(self, node: NodeResult) -> None:
        """A node ended: keep it and tell the listener."""
        with self._lock:
            self.nodes.append(node)
            self.on_event(node)

    def event(self, node: NodeResult) -> None:
        """A running node has news."""
        with self._lock:
            self.on_event(node)


def _utc_now() -> str:
    """Now, as Argo writes a timestamp (RFC 3339, UTC, seconds)."""
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
