"""Running a resource template: the manifest is filled (its structure checked), the object it
creates runs here — a Volcano Job as a local gang — and the template's success and failure
conditions and output jsonPaths are read from the object's status, as Argo reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangway.argo.conditions import resource_condition
from gangway.argo.manifests import fill_manifest
from gangway.errors import UnsupportedConstruct
from gangway.local._attempt import Attempt, RunContext, safe_name
from gangway.local._gang import gang_processes, run_volcano_job
from gangway.local._results import NodeResult, Outcome
from gangway.volcano.gang import is_job, read_gang
from gangway.volcano.job import JOB_API_VERSION

__all__ = ["run_resource"]


def run_resource(a: Attempt, ctx: RunContext) -> Outcome:
    """Create the attempt's object (locally: run it) and judge it by the template's
    conditions."""
    res = a.template["resource"]
    where = f"{a.where}.resource"
    manifest = fill_manifest(str(res.get("manifest", "")), a.scope, where=where)
    if not is_job(manifest):
        got = manifest if isinstance(manifest, Mapping) else {}
        raise UnsupportedConstruct(
            f"{where}: only Volcano Jobs ({JOB_API_VERSION}) run locally, "
            f"not {got.get('apiVersion')}/{got.get('kind')}"
        )
    a.node.log = a.log_dir / safe_name(a.node.name)

    def restarted(n: int, why: str, node: NodeResult = a.node) -> None:
        node.message = f"gang restart {n}: {why}"
        ctx.progress(node)

    meta = manifest.get("metadata") or {}
    # Gangs side by side share this machine's processes: one starts once its own are free.
    with ctx.gangs.held(gang_processes(read_gang(manifest))):
        gang = run_volcano_job(
            manifest,
            name=meta.get("name") or f"{meta.get('generateName', 'job-')}{a.node.attempts:05d}",
            scratch=lambda pod: a.scratch / pod,
            log_dir=a.node.log,
            cwd=a.scratch,
            ctx=ctx,
            on_restart=restarted,
        )
    msg = f"Volcano Job {gang.phase}: {gang.message}"
    if gang.restarts:
        msg += f" ({gang.restarts} gang restart(s))"
    if res.get("failureCondition") and resource_condition(res["failureCondition"], gang.job):
        return Outcome("Failed", None, msg)
    if res.get("successCondition") and resource_condition(res["successCondition"], gang.job):
        return Outcome("Succeeded", None, msg, _json_path_outputs(a.template, gang.job))
    return Outcome("Failed", None, msg + " (neither success nor failure condition matched)")


def _json_path_outputs(template: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, str]:
    """Output parameters of a resource template: ``valueFrom.jsonPath`` like ``{.a.b}``
    (the form :mod:`gangway.local.validation` allows)."""
    outs = {}
    for p in (template.get("outputs") or {}).get("parameters", []):
        path = str((p.get("valueFrom") or {}).get("jsonPath", ""))
        node: Any = obj
        for part in path[2:-1].split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        outs[p["name"]] = "" if node is None else str(node)
    return outs
