"""Executing a compiled Workflow on this machine (see the package docstring)."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.compiler import check_parameter_names
from gangway.errors import GangwayError, PermanentError
from gangway.local._conditions import depends_on, resource_condition
from gangway.local._expr import evaluate
from gangway.local._gang import error_summary, run_volcano_job
from gangway.local._model import NodeResult, RunResult, UnsupportedConstruct
from gangway.local._processes import ProcessGroups, Stopped
from gangway.local._subst import fill_manifest, parameters_json, substitute, substitute_tree
from gangway.local._subst import map_scratch as _map_scratch

__all__ = ["LocalExecutor", "workflow_from_template"]

_UNSUPPORTED_SPEC = (
    "onExit",
    "hooks",
    "volumeClaimTemplates",
    "synchronization",
    "templateDefaults",
)
_UNSUPPORTED_TEMPLATE = (
    "steps",
    "suspend",
    "http",
    "plugin",
    "containerSet",
    "data",
    "sidecars",
    "initContainers",
    "daemon",
    "memoize",
    "synchronization",
)
_UNSUPPORTED_TASK = ("templateRef", "withSequence", "continueOn", "hooks", "onExit", "inline")
ATTEMPT_HEADER = "--- attempt "
"""Starts the line the executor writes into a step's log before each attempt."""
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


def _seconds(text: str | int | None) -> float:
    if text is None:
        return 0.0
    m = _DURATION.match(str(text).strip())
    if not m:
        raise UnsupportedConstruct(f"retry backoff duration {text!r} is not supported locally")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


def workflow_from_template(
    template: Mapping[str, Any],
    overrides: Mapping[str, str] | None = None,
    *,
    uid: str | None = None,
) -> dict[str, Any]:
    """The Workflow that submitting ``template`` with ``overrides`` would create."""
    if template.get("kind") not in ("WorkflowTemplate", "Workflow"):
        raise PermanentError(f"expected a WorkflowTemplate or Workflow, got {template.get('kind')}")
    spec = json.loads(json.dumps(template.get("spec", {})))
    params = spec.setdefault("arguments", {}).setdefault("parameters", [])
    known = {p["name"]: p for p in params}
    check_parameter_names(dict(template), overrides or {})
    for name, value in (overrides or {}).items():
        known[name]["value"] = str(value)
    base = template.get("metadata", {}).get("name") or "workflow"
    meta = {
        "name": f"{base}-{secrets.token_hex(3)}",
        "uid": uid or str(uuid.uuid4()),
        "labels": dict(template.get("metadata", {}).get("labels", {})),
        "annotations": dict(template.get("metadata", {}).get("annotations", {})),
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta,
        "spec": spec,
    }


class LocalExecutor:
    """Runs one compiled Workflow; construct, then call :meth:`run`."""

    def __init__(
        self,
        workflow: Mapping[str, Any],
        state_dir: Path,
        *,
        on_event: Callable[[NodeResult], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        parallelism: int | None = None,
        env: Mapping[str, str] | None = None,
        previous: Mapping[str, NodeResult] | None = None,
        grace: float = 30.0,
    ) -> None:
        """``previous``: the nodes of an earlier run of this workflow (``gangway retry``); those
        that succeeded are not run again, their recorded outputs are used. ``grace``: seconds
        between SIGTERM and SIGKILL when a step, a gang pod or the whole run is stopped."""
        self.wf = workflow
        self.base_env = {**os.environ, **(env or {})}
        self.spec: dict[str, Any] = dict(workflow["spec"])
        self.name = str(workflow["metadata"]["name"])
        self.uid = str(workflow["metadata"]["uid"])
        self.root = state_dir.resolve() / "runs" / self.name
        self.on_event = on_event or (lambda n: None)
        self.sleep, self.clock = sleep, clock
        self.templates = {t["name"]: t for t in self.spec.get("templates", [])}
        self.params = {
            p["name"]: str(p.get("value", p.get("default", "")))
            for p in self.spec.get("arguments", {}).get("parameters", [])
        }
        self.nodes: list[NodeResult] = []
        # Fanned-out items run one at a time unless asked: on a small machine, CPU-bound steps
        # side by side only contend for the same cores.
        self.parallelism = max(1, int(parallelism or self.spec.get("parallelism") or 1))
        self._lock = threading.Lock()
        self.outputs: dict[str, dict[str, str]] = {}
        self.phases: dict[str, str] = {}
        self.previous = {n: r for n, r in (previous or {}).items() if r.phase == "Succeeded"}
        self.grace = grace
        self.procs = ProcessGroups(f"{self.uid}.{secrets.token_hex(3)}")
        self._check()

    # ---- validation ----------------------------------------------------------------------

    def _check(self) -> None:
        for key in _UNSUPPORTED_SPEC:
            if self.spec.get(key):
                raise UnsupportedConstruct(f"spec.{key} is not supported by the local executor")
        entry = self.spec.get("entrypoint")
        if entry not in self.templates:
            raise UnsupportedConstruct(f"spec.entrypoint {entry!r} names no template")
        for i, t in enumerate(self.spec.get("templates", [])):
            where = f"spec.templates[{i}] ({t.get('name')})"
            for key in _UNSUPPORTED_TEMPLATE:
                if t.get(key):
                    raise UnsupportedConstruct(
                        f"{where}: `{key}` is not supported by the local executor"
                        + ("; express the steps as a DAG" if key == "steps" else "")
                    )
            for io in ("inputs", "outputs"):
                if (t.get(io) or {}).get("artifacts"):
                    raise UnsupportedConstruct(f"{where}: {io}.artifacts are not supported locally")
            for v in t.get("volumes") or []:
                if set(v) - {"name", "emptyDir"}:
                    raise UnsupportedConstruct(f"{where}: only emptyDir volumes run locally")
            if "dag" in t and t["name"] != entry:
                raise UnsupportedConstruct(
                    f"{where}: nested DAG templates are not supported locally"
                )
        if "dag" not in self.templates[entry]:
            raise UnsupportedConstruct(f"the entrypoint {entry!r} must be a DAG template")
        for task in self.templates[entry]["dag"].get("tasks", []):
            for key in _UNSUPPORTED_TASK:
                if task.get(key):
                    raise UnsupportedConstruct(
                        f"task {task['name']}: `{key}` is not supported locally"
                    )
            if task.get("template") not in self.templates:
                raise UnsupportedConstruct(
                    f"task {task['name']}: unknown template {task.get('template')!r}"
                )

    # ---- scopes --------------------------------------------------------------------------

    def _wf_scope(self) -> dict[str, str]:
        scope = {
            "workflow.name": self.name,
            "workflow.uid": self.uid,
            "workflow.namespace": "local",
            "workflow.serviceAccountName": str(self.spec.get("serviceAccountName", "")),
        }
        scope.update({f"workflow.parameters.{k}": v for k, v in self.params.items()})
        scope["workflow.parameters.json"] = parameters_json(self.params)
        labels = self.wf["metadata"].get("labels") or {}
        scope.update({f"workflow.labels.{k}": str(v) for k, v in labels.items()})
        return scope

    def _dag_scope(self) -> dict[str, str]:
        scope = self._wf_scope()
        for task, outs in self.outputs.items():
            scope.update({f"tasks.{task}.outputs.parameters.{k}": v for k, v in outs.items()})
        return scope

    # ---- the DAG -------------------------------------------------------------------------

    def interrupt(self, sig: int) -> None:
        """Stop the run (SIGINT/SIGTERM to ``gangway run``): SIGTERM every running step and gang
        pod, SIGKILL what is left after the grace period; start nothing new. Safe to call from a
        signal handler; a second call kills at once."""
        self.procs.stop(sig, self.grace)

    def run(self) -> RunResult:
        """Run the DAG to its end (or until interrupted). Never raises for a failing step or a
        construct found unsupported mid-run: the result says what happened."""
        t0 = self.clock()
        tasks = self.templates[self.spec["entrypoint"]]["dag"].get("tasks", [])
        deps = {t["name"]: self._deps(t) for t in tasks}
        for name, d in deps.items():
            for dep in d:
                if dep not in deps:
                    raise UnsupportedConstruct(f"task {name}: depends on unknown task {dep!r}")
        failed = False
        error = ""
        pending = [t["name"] for t in tasks]
        by_name = {t["name"]: t for t in tasks}
        while pending and not failed and self.procs.stopping is None:
            ready = [n for n in pending if all(d in self.phases for d in deps[n])]
            if not ready:
                error = f"tasks {pending} can never run (a dependency cycle?)"
                break
            name = ready[0]
            pending.remove(name)
            if not all(self.phases[d] in ok for d, ok in deps[name].items()):
                self._omit(by_name[name], "a dependency did not end as required")
                self.phases[name] = "Omitted"
                continue
            try:
                self.phases[name] = self._run_task(by_name[name])
            except BaseException as e:
                if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: no survivors
                    self.procs.kill_all()
                    raise
                # found mid-run (or a bug): end the run, say where
                self.phases[name] = "Error"
                error = str(e) if isinstance(e, GangwayError) else self._internal(e)
                template = str(by_name[name]["template"])
                self._record(NodeResult(name, name, template, "Error", message=error))
            failed = self.phases[name] not in ("Succeeded", "Skipped")
        why = "not run: the workflow failed first"
        if self.procs.stopping is not None:
            why = f"not run: interrupted ({signal.Signals(self.procs.stopping).name})"
        for name in pending:
            self._omit(by_name[name], why)
        survivors = self.procs.close()
        phase = "Failed" if failed or error or self.procs.stopping is not None else "Succeeded"
        return RunResult(
            self.name,
            self.uid,
            phase,
            self.nodes,
            dict(self.params),
            self.root,
            round(self.clock() - t0, 2),
            interrupted=self.procs.stopping,
            error=error,
            survivors=survivors,
        )

    def _internal(self, e: Exception) -> str:
        """An unexpected error: the traceback goes to a file, the run ends with one line."""
        import traceback

        path = self.root / "executor-error.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(e)))
        return f"internal error: {type(e).__name__}: {e} (traceback in {path})"

    def _deps(self, task: Mapping[str, Any]) -> dict[str, set[str]]:
        if task.get("depends"):
            return depends_on(str(task["depends"]), where=f"task {task['name']}")
        return {d: {"Succeeded", "Skipped", "Daemoned"} for d in task.get("dependencies") or []}

    def _omit(self, task: Mapping[str, Any], why: str, node: str | None = None) -> NodeResult:
        name = str(task["name"])
        result = NodeResult(node or name, name, str(task["template"]), "Omitted", message=why)
        self._record(result)
        return result

    def _record(self, node: NodeResult) -> None:
        with self._lock:
            self.nodes.append(node)
            self.on_event(node)

    def _event(self, node: NodeResult) -> None:
        with self._lock:
            self.on_event(node)

    def _run_task(self, task: Mapping[str, Any]) -> str:
        name = str(task["name"])
        scope = self._dag_scope()
        if "when" in task:
            cond = substitute(str(task["when"]), scope, where=f"task {name}.when")
            if not evaluate(cond, {}):
                self._record(
                    NodeResult(
                        name,
                        name,
                        task["template"],
                        phase="Skipped",
                        message=f"when: {cond} is false",
                    )
                )
                return "Skipped"
        items: list[Any] | None = None
        if "withItems" in task:
            items = list(task["withItems"])
        elif "withParam" in task:
            raw = substitute(str(task["withParam"]), scope, where=f"task {name}.withParam")
            try:
                items = json.loads(raw)
            except ValueError:
                raise PermanentError(
                    f"task {name}: withParam is not a JSON list: {raw[:200]}"
                ) from None
            if not isinstance(items, list):
                raise PermanentError(f"task {name}: withParam must be a JSON list, got {raw[:200]}")
        if items is None:
            node = self._run_node(task, name, scope)
            self.outputs[name] = node.outputs
            return node.phase

        def one(i: int, item: Any) -> NodeResult:
            label = item if isinstance(item, str | int | float) else i
            node_name = f"{name}({i}:{label})"
            if self.procs.stopping is not None:
                return self._omit(task, "not run: interrupted", node_name)
            return self._run_node(task, node_name, {**scope, **_item_scope(item)})

        # Fanned-out items run side by side (as Argo runs them) up to the parallelism limit.
        with ThreadPoolExecutor(max_workers=self.parallelism) as pool:
            results = list(pool.map(one, range(len(items)), items))
        keys = {k for r in results for k in r.outputs}
        self.outputs[name] = {k: json.dumps([r.outputs.get(k) for r in results]) for k in keys}
        ok = len(results) == len(items) and all(r.phase == "Succeeded" for r in results)
        return "Succeeded" if ok else "Failed"

    # ---- one node, with retries ----------------------------------------------------------

    def _run_node(
        self, task: Mapping[str, Any], node_name: str, scope: Mapping[str, str]
    ) -> NodeResult:
        template = self.templates[task["template"]]
        if node_name in self.previous:  # `gangway retry`: done before, keep what it produced
            done = self.previous[node_name]
            kept = NodeResult(node_name, done.task, done.template, "Succeeded", done.attempts)
            kept.outputs, kept.log = dict(done.outputs), done.log
            kept.message = "succeeded before the retry: outputs reused"
            self._record(kept)
            return kept
        node = NodeResult(node_name, str(task["name"]), str(template["name"]), phase="Running")
        args = {
            p["name"]: substitute(str(p.get("value", "")), scope, where=f"task {node_name}")
            for p in (task.get("arguments") or {}).get("parameters", [])
        }
        inputs: dict[str, str] = {}
        for p in (template.get("inputs") or {}).get("parameters", []):
            if p["name"] in args:
                inputs[p["name"]] = args[p["name"]]
            elif "value" in p or "default" in p:
                inputs[p["name"]] = str(p.get("value", p.get("default")))
            else:
                raise PermanentError(
                    f"task {node_name}: input parameter {p['name']!r} has no value"
                )
        tscope = {**self._wf_scope(), **{f"inputs.parameters.{k}": v for k, v in inputs.items()}}
        tscope["inputs.parameters"] = json.dumps(
            [{"name": k, "value": v} for k, v in inputs.items()]
        )
        strategy = template.get("retryStrategy") or {}
        limit = int(substitute(str(strategy.get("limit", 0)), tscope, where="retryStrategy.limit"))
        backoff = strategy.get("backoff") or {}
        started = self.clock()
        self._event(node)
        while True:
            node.attempts += 1
            status, code, message, outputs = self._attempt(template, tscope, node)
            node.exit_code, node.message, node.outputs = code, message, outputs
            if status == "Succeeded":
                break
            if self.procs.stopping is not None:
                status = "Failed"
                node.message = f"stopped: interrupted ({_signame(self.procs.stopping)}); {message}"
                break
            retry_no = node.attempts - 1
            if retry_no >= limit or not self._may_retry(strategy, status, code, message):
                break
            delay = _seconds(backoff.get("duration")) * float(backoff.get("factor", 1)) ** retry_no
            max_total = _seconds(backoff.get("maxDuration")) if backoff.get("maxDuration") else None
            if max_total is not None and self.clock() - started + delay > max_total:
                break
            node.message = f"{message}; retry {node.attempts} in {delay:.0f}s"
            self._event(node)
            self.sleep(delay)
        node.phase = status
        node.seconds = round(self.clock() - started, 2)
        self._record(node)
        return node

    @staticmethod
    def _may_retry(
        strategy: Mapping[str, Any], status: str, code: int | None, message: str
    ) -> bool:
        policy = strategy.get("retryPolicy", "OnFailure")
        allowed = {
            "Always": {"Failed", "Error"},
            "OnFailure": {"Failed"},
            "OnError": {"Error"},
            "OnTransientError": {"Error"},
        }.get(policy)
        if allowed is None:
            raise UnsupportedConstruct(f"retryPolicy {policy!r} is not supported locally")
        if status not in allowed:
            return False
        if expr := strategy.get("expression"):
            scope = {
                "lastRetry.status": status,
                "lastRetry.exitCode": "" if code is None else str(code),
                "lastRetry.message": message,
            }
            return bool(evaluate(str(expr), scope))
        return True

    def _attempt(
        self, template: Mapping[str, Any], scope: Mapping[str, str], node: NodeResult
    ) -> tuple[str, int | None, str, dict[str, str]]:
        scratch = self.root / "steps" / _safe(node.name) / f"attempt-{node.attempts}"
        scratch.mkdir(parents=True, exist_ok=True)
        log_dir = self.root / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        attempt = _Attempt(template, scope, node, scratch, log_dir)
        if "container" in template or "script" in template:
            return self._container(attempt)
        if "resource" in template:
            return self._resource(attempt)
        raise UnsupportedConstruct(f"template {template['name']}: no container, script or resource")

    def _container(self, a: _Attempt) -> _Outcome:
        template, scope, node, scratch, log_dir = a.template, a.scope, a.node, a.scratch, a.log_dir
        where = f"template {template['name']}"
        body = template.get("container") or template.get("script") or {}
        c = substitute_tree(dict(body), scope, where=where)
        argv = [*(c.get("command") or []), *(c.get("args") or [])]
        if "script" in template:
            src = scratch / "script"
            src.write_text(str(c.get("source", "")))
            argv.append(str(src))
        if not argv:
            raise UnsupportedConstruct(
                f"{where}: the container has no command (image entrypoints are not known locally)"
            )
        if argv[0] == "python":
            argv[0] = sys.executable
        argv = [_map_scratch(a, scratch) for a in argv]
        env = dict(self.base_env)
        # Side-by-side steps share the cores, as pods share a node: one OpenMP pool each.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // self.parallelism)))
        for e in c.get("env") or []:
            if "valueFrom" in e:
                raise UnsupportedConstruct(f"{where}: env {e['name']} uses valueFrom")
            env[e["name"]] = _map_scratch(str(e.get("value", "")), scratch)
        node.log = log_dir / f"{_safe(node.name)}.log"
        with node.log.open("ab") as log:
            log.write(f"{ATTEMPT_HEADER}{node.attempts}: {' '.join(argv)}\n".encode())
            log.flush()
            try:
                proc = self.procs.start(
                    argv, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            except Stopped as e:
                return "Failed", None, str(e), {}
            try:
                rc = proc.wait()
            finally:
                self.procs.kill(proc)  # a step's processes end with it: sweep them
        if rc != 0:
            status, code = ("Error", 128 - rc) if rc < 0 else ("Failed", rc)
            return status, code, f"exit code {code}" + _tail(node.log), {}
        return self._outputs(template, scratch, node)

    def _outputs(
        self, template: Mapping[str, Any], scratch: Path, node: NodeResult
    ) -> tuple[str, int | None, str, dict[str, str]]:
        outs: dict[str, str] = {}
        for p in (template.get("outputs") or {}).get("parameters", []):
            vf = p.get("valueFrom") or {}
            if "path" not in vf:
                raise UnsupportedConstruct(
                    f"template {template['name']}: output {p['name']} needs valueFrom.path locally"
                )
            path = Path(_map_scratch(str(vf["path"]), scratch))
            if path.is_file():
                outs[p["name"]] = path.read_text()
            elif "default" in vf:
                outs[p["name"]] = str(vf["default"])
            else:
                return "Error", 0, f"output parameter {p['name']}: {vf['path']} was not written", {}
        return "Succeeded", 0, "", outs

    def _resource(self, a: _Attempt) -> _Outcome:
        template, scope, node, scratch, log_dir = a.template, a.scope, a.node, a.scratch, a.log_dir
        res = template["resource"]
        where = f"template {template['name']}.resource"
        if res.get("action") != "create":
            raise UnsupportedConstruct(f"{where}: only action: create runs locally")
        manifest = fill_manifest(str(res.get("manifest", "")), scope, where=where)
        if (manifest or {}).get("apiVersion") != "batch.volcano.sh/v1alpha1" or (
            manifest.get("kind") != "Job"
        ):
            raise UnsupportedConstruct(
                f"{where}: only Volcano Jobs (batch.volcano.sh/v1alpha1) run locally, "
                f"not {manifest.get('apiVersion')}/{manifest.get('kind')}"
            )
        node.log = log_dir / _safe(node.name)

        def restarted(n: int, why: str) -> None:
            node.message = f"gang restart {n}: {why}"
            self._event(node)

        outcome = run_volcano_job(
            manifest,
            scratch=lambda pod: scratch / pod,
            log_dir=node.log,
            cwd=scratch,
            base_env=self.base_env,
            procs=self.procs,
            grace=self.grace,
            on_restart=restarted,
        )
        job_name = f"{manifest['metadata'].get('generateName', 'job-')}{node.attempts:05d}"
        obj = {
            "metadata": {"name": manifest["metadata"].get("name", job_name)},
            "status": {"state": {"phase": outcome.phase}, "retryCount": outcome.restarts},
        }
        msg = f"Volcano Job {outcome.phase}: {outcome.message}"
        if outcome.restarts:
            msg += f" ({outcome.restarts} gang restart(s))"
        if res.get("failureCondition") and resource_condition(res["failureCondition"], obj):
            return "Failed", None, msg, {}
        if res.get("successCondition") and resource_condition(res["successCondition"], obj):
            return "Succeeded", None, msg, _json_path_outputs(template, obj)
        return "Failed", None, msg + " (neither success nor failure condition matched)", {}


def _json_path_outputs(template: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, str]:
    """Output parameters of a resource template: ``valueFrom.jsonPath`` like ``{.a.b}``."""
    outs = {}
    for p in (template.get("outputs") or {}).get("parameters", []):
        path = str((p.get("valueFrom") or {}).get("jsonPath", ""))
        if not re.fullmatch(r"\{(\.[\w-]+)+\}", path):
            raise UnsupportedConstruct(
                f"template {template['name']}: output {p['name']}: only jsonPath like "
                "'{.status.state.phase}' is supported locally"
            )
        node: Any = obj
        for part in path[2:-1].split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        outs[p["name"]] = "" if node is None else str(node)
    return outs


@dataclass(frozen=True)
class _Attempt:
    """One attempt of one node: what to run, with which variables, where."""

    template: Mapping[str, Any]
    scope: Mapping[str, str]
    node: NodeResult
    scratch: Path
    log_dir: Path


_Outcome = tuple[str, int | None, str, dict[str, str]]
"""(status, exit code, message, output parameters) of one attempt."""


def _item_scope(item: Any) -> dict[str, str]:
    if isinstance(item, dict):
        scope = {f"item.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in item.items()}
        scope["item"] = json.dumps(item)
        return scope
    return {"item": item if isinstance(item, str) else json.dumps(item)}


def _signame(sig: int) -> str:
    return signal.Signals(sig).name


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


def _tail(log: Path | None, lines: int = 3) -> str:
    if log is None or not log.is_file():
        return ""
    text = [
        ln
        for ln in log.read_text(errors="replace").splitlines()
        if ln.strip() and not ln.startswith(ATTEMPT_HEADER)  # our own line, not the step's
    ]
    found = error_summary(text) or " | ".join(text[-lines:])[:300]
    return f": {found}" if text else ""
