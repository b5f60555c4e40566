"""A file of YAML manifests as a pipeline: read strictly, each document checked, and the one
object ``gangway run`` runs chosen and its template references resolved.

Every mistake is one line naming the file, the document (numbered as in the file, from 1) and
the field: YAML that does not parse (with its line), a key given twice, a document that is not
a Kubernetes object, an Argo kind with the wrong ``apiVersion``, a missing name, two objects of
the same kind and name, a ``{{workflow.parameters.X}}`` the workflow does not declare.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.argo.references import LIBRARY_KINDS, library, references, resolve, spec_of
from gangway.errors import NotFoundError, PermanentError, closest

__all__ = [
    "ARGO_API",
    "RUNNABLE",
    "Submission",
    "choose",
    "choose_to_submit",
    "label",
    "read_manifests",
]

ARGO_API = "argoproj.io/v1alpha1"
RUNNABLE = ("Workflow", "WorkflowTemplate", "CronWorkflow")
"""What ``gangway run`` runs (a CronWorkflow: once, as each time it fires)."""
ARGO_KINDS = (*RUNNABLE, "ClusterWorkflowTemplate")
_NAMED = ("WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
"""Kinds that need a ``metadata.name``: references and ``deploy`` find them by it."""
_HINT = "declare it under spec.arguments.parameters (with a value, or -p NAME=VALUE)"


def read_manifests(path: Path, *, run: bool = False) -> list[dict[str, Any]]:
    """The objects of the YAML file ``path``, each checked; with ``run``, only Argo's
    workflow kinds are taken (``lint`` and ``submit`` take any Kubernetes object)."""
    from gangway.user_yaml import read_documents

    if path.is_dir():
        raise PermanentError(
            f"{path}: a directory, not a file (give a Hera .py file or YAML manifests)"
        )
    if not path.is_file():
        raise NotFoundError(f"{path}: no such file (give a Hera .py file or YAML manifests)")
    try:
        raw = read_documents(path)
    except PermanentError as e:
        if path.suffix in (".yaml", ".yml", ".json"):
            raise
        raise PermanentError(f"{e} (a Hera pipeline file must end in .py)") from None
    numbered = [(n, _plain(d)) for n, d in enumerate(raw, 1) if d is not None]
    if not numbered:
        raise PermanentError(f"{path}: no documents (give a Workflow, WorkflowTemplate …)")
    seen: dict[tuple[str, str], int] = {}
    for n, doc in numbered:
        _check_document(path, n, doc, run=run)
        name = (doc.get("metadata") or {}).get("name")
        if name and (doc["kind"], name) in seen:
            raise PermanentError(
                f"{path}: documents {seen[(doc['kind'], name)]} and {n} are both "
                f"{doc['kind']}/{name}; give each object its own name"
            )
        if name:
            seen[(doc["kind"], name)] = n
    docs = [d for _, d in numbered]
    for n, doc in numbered:
        # Argo accepts a template naming workflow.parameters it does not declare (the
        # submitting Workflow may supply them): lint warns; only a run, which cannot, refuses.
        template = doc["kind"] in ("WorkflowTemplate", "ClusterWorkflowTemplate")
        if doc["kind"] in ARGO_KINDS and not _referenced(doc, docs) and (run or not template):
            _check_parameters(f"{path}: document {n} ({label(doc)})", resolve(doc, library(docs)))
    return docs


def _plain(node: Any, key: str = "") -> Any:
    """A document as the API server reads it: keys are strings, a date YAML read
    (``2024-01-01``) is the text it was, and a parameter's ``value``, ``default`` and
    ``enum`` are strings (Argo's ``AnyString``: ``true``, not Python's ``True``)."""
    if isinstance(node, dict):
        out = {str(k): _plain(v, str(k)) for k, v in node.items()}
        if key == "parameters":
            for field in ("value", "default"):
                if out.get(field) is not None:
                    out[field] = _text(out[field])
            if isinstance(out.get("enum"), list):
                out["enum"] = [_text(v) for v in out["enum"]]
        return out
    if isinstance(node, list):
        return [_plain(v, key) for v in node]
    if isinstance(node, datetime.date):
        return node.isoformat()
    return node


def _text(value: Any) -> Any:
    """A scalar as the JSON text Argo keeps of it; a list or mapping as it is (refused by
    the schema)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


def _check_document(path: Path, n: int, doc: Any, *, run: bool) -> None:
    at = f"{path}: document {n}"
    if not isinstance(doc, dict):
        raise PermanentError(
            f"{at} is a {type(doc).__name__}, not a Kubernetes object (a mapping with "
            "apiVersion, kind, metadata)"
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise PermanentError(f"{at}: {key}: missing; every object names its {key}")
    kind, api = doc["kind"], doc["apiVersion"]
    if run and kind not in ARGO_KINDS:
        near = closest(kind, RUNNABLE)
        raise PermanentError(
            f"{at}: kind {kind!r}: `gangway run` runs a Workflow, WorkflowTemplate or "
            "CronWorkflow (a file may hold WorkflowTemplates they reference)"
            + (f"; did you mean {near}?" if near else "; `gangway lint` checks other objects")
        )
    at = f"{at} ({kind})"
    if kind in ARGO_KINDS and api != ARGO_API:
        raise PermanentError(f"{at}: apiVersion: {api!r}; Argo's kinds are {ARGO_API}")
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise PermanentError(f"{at}: metadata: missing or not a mapping; it holds the name")
    names = ("name",) if kind in _NAMED else ("name", "generateName")
    if not any(isinstance(meta.get(k), str) and meta[k] for k in names):
        why = "references and deploys find it by name" if kind in _NAMED else "give one"
        raise PermanentError(f"{at}: metadata.{' or '.join(names)}: missing ({why})")
    if kind in ARGO_KINDS and not isinstance(doc.get("spec"), dict):
        raise PermanentError(f"{at}: spec: missing or not a mapping")
    if kind == "CronWorkflow" and not isinstance(doc["spec"].get("workflowSpec"), dict):
        raise PermanentError(f"{at}: spec.workflowSpec: missing or not a mapping")


def _check_parameters(where: str, manifest: Mapping[str, Any]) -> None:
    from gangway.argo.references import check_parameter_references

    check_parameter_references(where, manifest, _HINT)


def label(doc: Mapping[str, Any]) -> str:
    """``Kind/name`` (``Kind/generateName*`` for a Workflow with only a generateName)."""
    meta = doc.get("metadata") or {}
    name = meta.get("name") or f"{meta.get('generateName', '')}*"
    return f"{doc.get('kind')}/{name}"


def _referenced(doc: Mapping[str, Any], docs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``doc`` is a template object another document of the file references."""
    if doc.get("kind") not in LIBRARY_KINDS:
        return False
    key = (doc.get("kind") == "ClusterWorkflowTemplate", (doc.get("metadata") or {}).get("name"))
    return any(
        (r.cluster, r.name) == key for d in docs if d is not doc for r in references(spec_of(d))
    )


def choose(
    path: Path,
    docs: Sequence[Mapping[str, Any]],
    name: str | None = None,
    *,
    default: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The object of ``docs`` that ``gangway run`` runs, its references resolved.

    With ``name`` (``NAME`` or ``Kind/NAME``), the runnable object of that name; else the one
    runnable object no other one references (a file's WorkflowTemplates may be the library a
    Workflow or a CronWorkflow calls), or ``default`` when given (a Hera file's template). A
    reference to a template not in the file is refused: there is no cluster to fetch it
    from."""
    picked = _pick(path, docs, name, default)
    resolved = resolve(picked, library(docs))
    missing = references(spec_of(resolved))
    if missing:
        at_hand = ", ".join(label(d) for d in docs if d.get("kind") in LIBRARY_KINDS)
        fix = "the template in the workflow" if path.suffix == ".py" else "it in the file (---)"
        raise PermanentError(
            f"{path}: {label(picked)}: "
            + "; ".join(f"{r} in this file" for r in missing)
            + f" (it has: {at_hand or 'no WorkflowTemplate'}); a local run has no cluster to "
            f"fetch templates from: define {fix}"
        )
    return resolved


def _pick(
    path: Path,
    docs: Sequence[Mapping[str, Any]],
    name: str | None,
    default: Mapping[str, Any] | None,
) -> Mapping[str, Any]:
    """The runnable object of ``docs`` named ``name``, else ``default``, else the one no other
    object references."""
    runnable = [d for d in docs if d.get("kind") in RUNNABLE]
    listed = ", ".join(label(d) for d in runnable) or "none"
    if name is not None:
        picked = [d for d in runnable if _named(d, name)]
        if len(picked) != 1:
            which = "no runnable object" if not picked else f"{len(picked)} objects"
            raise PermanentError(
                f"--name {name}: {path} has {which} of that name (it has: {listed}); give "
                "--name NAME, or --name Kind/NAME when two kinds share a name"
            )
    elif default is not None:
        picked = [default]
    else:
        picked = [d for d in runnable if not _referenced(d, docs)]
        if not picked:
            raise PermanentError(
                f"{path}: nothing to run: no Workflow, WorkflowTemplate or CronWorkflow that "
                f"the file's other objects do not reference (it has: {listed}); choose one "
                "with --name NAME"
            )
        if len(picked) > 1:
            first = (picked[0].get("metadata") or {}).get("name") or label(picked[0])
            raise PermanentError(
                f"{path}: {len(picked)} objects to run ({', '.join(map(label, picked))}); "
                f"one runs at a time: choose it with --name NAME (e.g. --name {first})"
            )
    return picked[0]


@dataclass(frozen=True)
class Submission:
    """What ``gangway submit`` sends from a file: the object it starts a Workflow from (a
    WorkflowTemplate, a Workflow or a CronWorkflow), the file's WorkflowTemplates that object
    references (created or updated first, as a cluster must hold them), and the object with
    those references resolved (what its parameters and lint are read from)."""

    start: dict[str, Any]
    templates: list[dict[str, Any]]
    resolved: dict[str, Any]


def choose_to_submit(
    path: Path, docs: Sequence[Mapping[str, Any]], name: str | None = None
) -> Submission:
    """What ``gangway submit`` sends from ``docs``: the object of that ``name``; else a
    compiled pipeline's WorkflowTemplate (a Hera file's, or one followed by the CronWorkflows
    that run it, which ``deploy`` sends); else the one object the others do not reference —
    as :func:`choose` picks what ``gangway run`` runs."""
    argo = [d for d in docs if d.get("kind") in ARGO_KINDS]
    others = [d for d in argo if d.get("kind") != "CronWorkflow"]
    compiled = (
        name is None
        and len(others) == 1
        and others[0].get("kind") == "WorkflowTemplate"
        and argo[0] is others[0]
    )
    start = dict(_pick(path, docs, name, argo[0] if compiled else None))
    resolved = resolve(start, library(docs))
    wanted = {(r.cluster, r.name) for r in references(spec_of(start))}
    templates = [
        dict(d)
        for d in docs
        if d.get("kind") in LIBRARY_KINDS
        and ((d.get("kind") == "ClusterWorkflowTemplate"), (d.get("metadata") or {}).get("name"))
        in wanted
    ]
    return Submission(start, templates, resolved)


def _named(doc: Mapping[str, Any], name: str) -> bool:
    kind, _, bare = name.rpartition("/")
    if kind and kind.lower() != str(doc.get("kind")).lower():
        return False
    meta = doc.get("metadata") or {}
    generated = str(meta.get("generateName") or "")
    return bare == meta.get("name") or (
        not meta.get("name") and bool(generated) and bare in (generated, generated.rstrip("-"))
    )
