"""Plans for submitting and deploying (pure), and applying them through a thin Argo API.

Plan, then apply: ``--dry-run`` prints exactly the objects a plan holds; applying sends the
same objects, create-or-update, so deploying twice changes nothing the second time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gangway.config import PlatformConfig
from gangway.contract import PIPELINE_LABEL, TEAM_LABEL
from gangway.errors import PermanentError, TransientError
from gangway.workflows.compiler import check_parameter_names

__all__ = [
    "ArgoApi",
    "Plan",
    "apply_plan",
    "deploy_plan",
    "pipeline_of",
    "submit_plan",
    "team_namespace",
    "with_experiments",
]

_DEPLOYABLE = {"WorkflowTemplate", "CronWorkflow", "ClusterWorkflowTemplate"}
CRON_LABEL = "workflows.argoproj.io/cron-workflow"
"""The label Argo puts on a Workflow a CronWorkflow started."""


@dataclass(frozen=True)
class Plan:
    """Objects to create or update, in order; ``run`` is a Workflow to create, if any."""

    upserts: list[dict[str, Any]]
    run: dict[str, Any] | None
    namespace: str


def _with_namespace(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    if out.get("kind") != "ClusterWorkflowTemplate":
        out.setdefault("metadata", {})["namespace"] = namespace
    return out


def team_namespace(obj: Mapping[str, Any], config: PlatformConfig, fallback: str) -> str:
    """Where a team's workflows run: its namespace in the platform config (its service account,
    RBAC and semaphore are there), read from the workflow's team label; ``fallback`` for a
    workflow of no known team."""
    team = ((obj.get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL)
    views = config.team_views()
    return views[team].namespace if team in views else fallback


def submit_plan(
    start: Mapping[str, Any],
    params: Mapping[str, str],
    namespace: str,
    *,
    templates: Sequence[Mapping[str, Any]] = (),
    declared: Mapping[str, Any] | None = None,
) -> Plan:
    """Create-or-update ``templates`` (those ``start`` references), then start a Workflow with
    ``params`` from ``start``: a WorkflowTemplate (created or updated too, the Workflow refers
    to it), a Workflow (sent as it is, as ``argo submit`` sends one) or a CronWorkflow (a
    Workflow of its ``workflowSpec``, as ``argo submit --from cronwf/NAME`` starts one).
    ``declared`` is ``start`` with its references resolved: the parameters it declares."""
    kind = start.get("kind")
    check_parameter_names(dict(declared or start), params)
    upserts = [_with_namespace(t, namespace) for t in templates]
    meta = start.get("metadata") or {}
    if kind == "WorkflowTemplate":
        name = str(meta["name"])
        spec: dict[str, Any] = {"workflowTemplateRef": {"name": name}}
        run_meta = {"generateName": f"{name}-", "labels": dict(meta.get("labels") or {})}
        upserts = [*upserts, _with_namespace(start, namespace)]
    elif kind == "Workflow":
        spec = copy.deepcopy(dict(start.get("spec") or {}))
        run_meta = {k: v for k, v in copy.deepcopy(dict(meta)).items() if k != "namespace"}
    elif kind == "CronWorkflow":
        cron = start.get("spec") or {}
        spec = copy.deepcopy(dict(cron.get("workflowSpec") or {}))
        labels = dict((cron.get("workflowMetadata") or {}).get("labels") or {})
        labels[CRON_LABEL] = str(meta["name"])
        run_meta = {"generateName": f"{meta['name']}-", "labels": labels}
    else:
        raise PermanentError(
            f"submit starts a WorkflowTemplate, a Workflow or a CronWorkflow, got {kind}; "
            "use `gangway deploy` to create other objects"
        )
    spec["arguments"] = _with_values(spec.get("arguments") or {}, params)
    run = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {**run_meta, "namespace": namespace},
        "spec": spec,
    }
    return Plan(upserts, run, namespace)


def _with_values(arguments: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, Any]:
    """``arguments`` with each of ``params`` as its parameter's value (added when the spec
    does not list it: a WorkflowTemplate's default is then replaced by it)."""
    out = copy.deepcopy(dict(arguments))
    listed = [dict(p) for p in out.get("parameters") or []]
    names = {p.get("name") for p in listed}
    for p in listed:
        if p.get("name") in params:
            p["value"] = str(params[str(p["name"])])
    listed += [{"name": k, "value": str(v)} for k, v in sorted(params.items()) if k not in names]
    if listed:
        out["parameters"] = listed
    return out


def deploy_plan(objects: Sequence[Mapping[str, Any]], namespace: str) -> Plan:
    """Create-or-update templates and CronWorkflows (idempotent)."""
    for obj in objects:
        if obj.get("kind") not in _DEPLOYABLE:
            raise PermanentError(
                f"deploy takes {', '.join(sorted(_DEPLOYABLE))}; got "
                f"{obj.get('kind')} (use `gangway submit` to run a pipeline)"
            )
    return Plan([_with_namespace(o, namespace) for o in objects], None, namespace)


def pipeline_of(obj: Mapping[str, Any]) -> str:
    """The pipeline an object runs: its ``gangway.dev/pipeline`` label, else its name."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(labels.get(PIPELINE_LABEL) or meta.get("name") or meta.get("generateName"))


def with_experiments(plan: Plan, experiment_ids: Mapping[str, str]) -> Plan:
    """The plan with each object annotated with its pipeline's MLflow experiment id (by
    pipeline name), which the Argo UI link to a workflow's MLflow runs reads (see
    :mod:`gangway.lineage.links`)."""
    from gangway.lineage.links import annotate_experiment

    def one(obj: dict[str, Any]) -> dict[str, Any]:
        exp = experiment_ids.get(pipeline_of(obj))
        return annotate_experiment(obj, exp) if exp else obj

    return Plan([one(o) for o in plan.upserts], one(plan.run) if plan.run else None, plan.namespace)


class ArgoApi(Protocol):
    """The few Argo server calls Gangway makes (implemented over Hera's WorkflowsService)."""

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None: ...
    def create(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]: ...
    def update(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]: ...


def apply_plan(plan: Plan, api: ArgoApi) -> tuple[list[str], dict[str, Any] | None]:
    """Send the plan: returns what was done per object and the created Workflow, if any."""
    done = []
    for obj in plan.upserts:
        kind, name = obj["kind"], obj["metadata"]["name"]
        current = api.get(kind, name, plan.namespace)
        if current is None:
            api.create(obj, plan.namespace)
            done.append(f"created {kind}/{name}")
        elif _same(current, obj):
            done.append(f"unchanged {kind}/{name}")
        else:
            update = copy.deepcopy(obj)
            update["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            api.update(update, plan.namespace)
            done.append(f"updated {kind}/{name}")
    created = api.create(plan.run, plan.namespace) if plan.run else None
    return done, created


def _same(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    keys = ("labels", "annotations")
    cm, dm = current.get("metadata") or {}, desired.get("metadata") or {}
    return current.get("spec") == desired.get("spec") and all(
        (cm.get(k) or {}) == (dm.get(k) or {}) for k in keys
    )


class HeraArgoApi:
    """:class:`ArgoApi` over Hera's WorkflowsService (the thin I/O layer)."""

    def __init__(self, host: str, token: str | None, verify_ssl: bool) -> None:
        from hera.workflows.service import WorkflowsService

        self.svc = WorkflowsService(host=host, token=token, verify_ssl=verify_ssl)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from hera.exceptions import NotFound

        try:
            return fn(*args, **kwargs)
        except NotFound:
            return None
        except OSError as e:  # connection refused, DNS, TLS
            raise TransientError(f"{what}: cannot reach the Argo server: {e}") from e
        except Exception as e:
            raise PermanentError(f"{what}: the Argo server said: {e}") from e

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        getter = {
            "WorkflowTemplate": self.svc.get_workflow_template,
            "CronWorkflow": self.svc.get_cron_workflow,
            "Workflow": self.svc.get_workflow,
        }[kind]
        got = self._call(f"get {kind}/{name}", getter, name, namespace=namespace)
        return None if got is None else _plain(got)

    def create(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        from hera.workflows import models as m

        kind = obj["kind"]
        if kind == "WorkflowTemplate":
            req: Any = m.WorkflowTemplateCreateRequest(
                template=m.WorkflowTemplate.model_validate(obj)
            )
            out = self._call("create", self.svc.create_workflow_template, req, namespace=namespace)
        elif kind == "CronWorkflow":
            req = m.CreateCronWorkflowRequest(cron_workflow=m.CronWorkflow.model_validate(obj))
            out = self._call("create", self.svc.create_cron_workflow, req, namespace=namespace)
        else:
            req = m.WorkflowCreateRequest(workflow=m.Workflow.model_validate(obj))
            out = self._call("create", self.svc.create_workflow, req, namespace=namespace)
        return _plain(out)

    def update(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        from hera.workflows import models as m

        name = obj["metadata"]["name"]
        if obj["kind"] == "WorkflowTemplate":
            req: Any = m.WorkflowTemplateUpdateRequest(
                template=m.WorkflowTemplate.model_validate(obj)
            )
            out = self._call(
                "update", self.svc.update_workflow_template, name, req, namespace=namespace
            )
        else:
            req = m.UpdateCronWorkflowRequest(cron_workflow=m.CronWorkflow.model_validate(obj))
            out = self._call(
                "update", self.svc.update_cron_workflow, name, req, namespace=namespace
            )
        return _plain(out)


def _plain(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return out
