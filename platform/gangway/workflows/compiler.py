"""Loading a pipeline file — a Hera ``.py`` file compiled, or YAML manifests read and checked
(:mod:`gangway.workflows.manifest_files`) — to the manifests sent to Argo or run here."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

import yaml

from gangway.argo.references import (
    check_parameter_references,
    declared_parameters,
    parameters_taken,
)
from gangway.errors import GangwayError, NotFoundError, PermanentError, closest

__all__ = [
    "check_parameter_names",
    "compile_documents",
    "compile_pipeline",
    "import_root",
    "load_documents",
    "load_objects",
    "load_pipeline",
    "runnable_manifest",
    "to_yaml",
]


def load_pipeline(path: Path) -> Any:
    """Import ``path`` and return the one Hera WorkflowTemplate/Workflow (or CronWorkflow) it
    defines."""
    return load_objects(path)[0]


def load_objects(path: Path) -> list[Any]:
    """Import ``path`` and return its Hera objects: the one WorkflowTemplate/Workflow it
    defines, then any CronWorkflows that run it (or one lone CronWorkflow)."""
    from hera.workflows import CronWorkflow, Workflow

    if not path.is_file():
        raise NotFoundError(f"{path}: no such pipeline file")
    name, root = _module_name(path.resolve())
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PermanentError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's pipeline code failed: show where, briefly
        mine = str(path.resolve())
        frames = [
            f
            for f in traceback.extract_tb(e.__traceback__)
            if str(Path(f.filename).resolve()) == mine
        ]
        at = f" (line {frames[-1].lineno})" if frames else ""
        what = "" if isinstance(e, GangwayError) else f"{type(e).__name__}: "
        raise PermanentError(f"{path}{at}: {what}{e}") from None
    found = [v for v in vars(module).values() if isinstance(v, Workflow | CronWorkflow)]
    found = list({id(v): v for v in found}.values())
    crons = [v for v in found if isinstance(v, CronWorkflow)]
    others = [v for v in found if not isinstance(v, CronWorkflow)]
    if len(others) == 1:
        template = others[0]
        for c in crons:
            ref = getattr(c, "workflow_template_ref", None)
            if getattr(ref, "name", None) != template.name:
                raise PermanentError(
                    f"{path}: CronWorkflow {c.name!r} must run the file's WorkflowTemplate "
                    f"{template.name!r} (gangway.workflows.cron.nightly(w, ...))"
                )
        return [template, *crons]
    if not others and len(crons) == 1:
        return crons
    what = "no" if not found else f"{len(others)}"
    raise PermanentError(
        f"{path}: defines {what} workflow objects at module level; a pipeline file defines "
        "exactly one WorkflowTemplate (or Workflow), and CronWorkflows that run it"
    )


def _module_name(path: Path) -> tuple[str, Path]:
    """The importable name of a pipeline file and the directory it is importable from.

    ``pipelines/x.py`` inside a package is ``pipelines.x`` (so Hera's runner scripts name an
    entry point the container can import); a loose file is its stem.
    """
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").is_file():
        parts.insert(0, parent.name)
        parent = parent.parent
    return ".".join(parts), parent


def import_root(path: Path) -> Path:
    """The directory from which the pipeline file is importable as a module (a YAML file's
    own directory: its scripts may import what lies beside it)."""
    if path.suffix != ".py":
        return path.resolve().parent
    return _module_name(path.resolve())[1]


def load_documents(path: Path, *, run: bool = False) -> list[dict[str, Any]]:
    """The manifests of a pipeline file, each checked: a Hera ``.py`` file compiled, any
    other file read as YAML manifests (:mod:`gangway.workflows.manifest_files`; with ``run``, only
    Argo's workflow kinds)."""
    if path.suffix == ".py":
        return compile_documents(path)
    from gangway.workflows.manifest_files import read_manifests

    return read_manifests(path, run=run)


def runnable_manifest(path: Path, name: str | None = None) -> dict[str, Any]:
    """The object ``gangway run`` runs from ``path`` (``name``: which one, when the file
    holds several), with the template references it makes to the file's WorkflowTemplates
    resolved; a Hera file's template by default."""
    from gangway.workflows.manifest_files import choose

    docs = load_documents(path, run=True)
    default = docs[0] if path.suffix == ".py" and name is None else None
    return choose(path, docs, name, default=default)


def compile_pipeline(path: Path) -> dict[str, Any]:
    """The manifest of the pipeline in ``path`` as a plain dict (its WorkflowTemplate: what
    ``gangway run`` and ``submit`` run)."""
    return compile_documents(path)[0]


def compile_documents(path: Path) -> list[dict[str, Any]]:
    """Every manifest of the pipeline in ``path``: its template, then its CronWorkflows. A
    reference to a workflow parameter the workflow does not declare is refused here, as Argo
    refuses it (before, it compiled and failed only when its step was about to run)."""
    docs: list[dict[str, Any]] = [o.to_dict() for o in load_objects(path)]
    for doc in docs:
        check_parameter_references(str(path), doc, _PIPELINE_HINT)
    return docs


_PIPELINE_HINT = (
    "a Gangway pipeline declares its parameters with pipeline(..., parameters=Params), the "
    "model p = parameters(Params) reads"
)


def check_parameter_names(manifest: dict[str, Any], names: Any) -> None:
    """Refuse values for parameters the manifest does not declare, listing the ones it does."""
    declared = declared_parameters(manifest)
    unknown = sorted(set(names) - declared)
    if unknown:
        named = []
        for name in unknown:
            near = closest(name, declared)
            named.append(f"{name} (did you mean {near}?)" if near else name)
        raise PermanentError(
            f"unknown parameter(s) {', '.join(named)}; {parameters_taken(declared)}"
        )


def to_yaml(manifest: dict[str, Any] | list[dict[str, Any]]) -> str:
    """Stable YAML (sorted keys) for golden files and ``gangway compile``; a list is one
    document each."""
    docs = manifest if isinstance(manifest, list) else [manifest]
    return "---\n".join(yaml.safe_dump(d, sort_keys=True, width=100) for d in docs)
