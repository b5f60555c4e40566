"""``templateRef`` and ``workflowTemplateRef`` resolved against the WorkflowTemplates at hand
(those of one file): a pure function over documents, shared by ``gangway run`` and the checks
``lint`` and ``submit`` make.

Argo's semantics (``workflow/util/merge.go`` ``JoinWorkflowSpec``; the controller's
``setStoredWfSpec`` in ``workflow/controller/operator.go``; ``templateresolution``):

* ``workflowTemplateRef``: the Workflow's spec is a strategic merge patch over the referenced
  template's spec. A field the Workflow sets wins; mappings merge key by key; the lists
  ``WorkflowSpec`` tags ``patchStrategy: merge`` (``templates``, ``arguments.parameters`` …)
  merge item by item on their key — a Workflow's ``{name: x, value: 2}`` replaces the value of
  the template's parameter ``x`` and keeps its other fields; every other list is replaced
  whole (``resourceClaims`` among them).
* ``templateRef {name, template}``: that template of that WorkflowTemplate, in the context of
  its WorkflowTemplate: the names it calls (``template:``, ``onExit``, hooks) are the
  WorkflowTemplate's templates, not the Workflow's. The referenced WorkflowTemplate's spec
  (its volumes, arguments, defaults) does not come along.

Resolving copies each referenced template into the spec's own templates (under its own name
when free, else ``WORKFLOWTEMPLATE.TEMPLATE``, a name no user template can have) and points the
call at the copy. A reference to a template not at hand is left as it is: :func:`references`
of the result lists exactly those.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangway.argo.substitution import PLACEHOLDER
from gangway.errors import PermanentError

__all__ = [
    "Reference",
    "check_parameter_references",
    "declared_parameters",
    "library",
    "merge_spec",
    "parameters_taken",
    "references",
    "resolve",
    "spec_of",
]

LIBRARY_KINDS = ("WorkflowTemplate", "ClusterWorkflowTemplate")

_MERGE_KEYS = {
    "templates": "name",
    "parameters": "name",
    "artifacts": "name",
    "volumes": "name",
    "volumeClaimTemplates": "name",
    "imagePullSecrets": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "tolerations": "key",
    "hostAliases": "ip",
}
"""The lists Argo's (and Kubernetes') types tag ``patchStrategy: merge``, with their keys."""

Key = tuple[bool, str]
"""A template object at hand: (cluster-scoped, name)."""


@dataclass(frozen=True)
class Reference:
    """One reference from a spec to a template object: ``template`` is None for a
    ``workflowTemplateRef``."""

    where: str
    name: str
    template: str | None
    cluster: bool

    def __str__(self) -> str:
        kind = "ClusterWorkflowTemplate" if self.cluster else "WorkflowTemplate"
        if self.template is None:
            return f"{self.where}: workflowTemplateRef {self.name}: no {kind} {self.name!r}"
        return (
            f"{self.where}: templateRef {self.name}/{self.template}: no {kind} "
            f"{self.name!r} with a template {self.template!r}"
        )


def spec_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The workflow spec of a Workflow, a template, or a CronWorkflow (its ``workflowSpec``)."""
    spec = doc.get("spec") or {}
    if doc.get("kind") == "CronWorkflow":
        spec = spec.get("workflowSpec") or {}
    return spec if isinstance(spec, dict) else {}


def library(docs: Sequence[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """The WorkflowTemplates and ClusterWorkflowTemplates among ``docs``, by key."""
    out: dict[Key, Mapping[str, Any]] = {}
    for d in docs:
        name = (d.get("metadata") or {}).get("name")
        if d.get("kind") in LIBRARY_KINDS and isinstance(name, str):
            out[(d.get("kind") == "ClusterWorkflowTemplate", name)] = d
    return out


def references(spec: Mapping[str, Any], at: str = "spec") -> list[Reference]:
    """Every ``templateRef`` and the ``workflowTemplateRef`` of ``spec``, with its path."""
    found = []
    ref = spec.get("workflowTemplateRef")
    if isinstance(ref, dict):
        found.append(_reference(ref, f"{at}.workflowTemplateRef", whole=True))
    for where, call in _calls(spec, at):
        if isinstance(call.get("templateRef"), dict):
            found.append(_reference(call["templateRef"], f"{where}.templateRef", whole=False))
    return found


def _reference(ref: Mapping[str, Any], where: str, *, whole: bool) -> Reference:
    template = None if whole else str(ref.get("template") or "")
    return Reference(where, str(ref.get("name") or ""), template, bool(ref.get("clusterScope")))


def _calls(spec: Mapping[str, Any], at: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every place that calls a template (a DAG task, a step, a hook), with its path."""
    for k, hook in (spec.get("hooks") or {}).items():
        if isinstance(hook, dict):
            yield f"{at}.hooks.{k}", hook
    for i, t in enumerate(spec.get("templates") or []):
        if isinstance(t, dict):
            yield from _template_calls(t, f"{at}.templates[{i}] ({t.get('name')})")


def _template_calls(t: Mapping[str, Any], at: str) -> Iterator[tuple[str, dict[str, Any]]]:
    calls = [
        (f"{at}.dag.tasks[{j}]", task)
        for j, task in enumerate((t.get("dag") or {}).get("tasks") or [])
    ]
    for g, group in enumerate(t.get("steps") or []):
        for j, step in enumerate(group if isinstance(group, list) else [group]):
            calls.append((f"{at}.steps[{g}][{j}]", step))
    for where, call in calls:
        if not isinstance(call, dict):
            continue
        yield where, call
        for k, hook in (call.get("hooks") or {}).items():
            if isinstance(hook, dict):
                yield f"{where}.hooks.{k}", hook
        if isinstance(call.get("inline"), dict):
            yield from _template_calls(call["inline"], f"{where}.inline")


def resolve(doc: Mapping[str, Any], at_hand: Mapping[Key, Mapping[str, Any]]) -> dict[str, Any]:
    """``doc`` with every reference to a template object ``at_hand`` resolved (see the
    module docstring); ``doc`` itself is not changed."""
    out = copy.deepcopy(dict(doc))
    spec = resolve_spec(spec_of(out), at_hand)
    if out.get("kind") == "CronWorkflow":
        out.setdefault("spec", {})["workflowSpec"] = spec
    else:
        out["spec"] = spec
    return out


def resolve_spec(
    spec: Mapping[str, Any], at_hand: Mapping[Key, Mapping[str, Any]]
) -> dict[str, Any]:
    """A workflow spec with its ``workflowTemplateRef`` merged and its ``templateRef`` calls
    pointed at copies of the templates they name."""
    out = copy.deepcopy(dict(spec))
    ref = out.get("workflowTemplateRef")
    if isinstance(ref, dict):
        key = (bool(ref.get("clusterScope")), str(ref.get("name") or ""))
        if key in at_hand:
            out = merge_spec(spec_of(at_hand[key]), out)
            del out["workflowTemplateRef"]
    _Inliner(out, at_hand).run()
    return out


class _Inliner:
    """Copies the templates ``templateRef`` calls name into ``spec`` (in place)."""

    def __init__(self, spec: dict[str, Any], at_hand: Mapping[Key, Mapping[str, Any]]) -> None:
        self.spec = spec
        self.at_hand = at_hand
        self.templates: list[Any] = spec.setdefault("templates", [])
        self.taken = {t.get("name") for t in self.templates if isinstance(t, dict)}
        self.copied: dict[tuple[bool, str, str], str] = {}

    def run(self) -> None:
        for _, call in list(_calls(self.spec, "spec")):  # not the copies: they are done
            self._point(call, None)

    def _point(self, call: dict[str, Any], home: tuple[bool, str] | None) -> None:
        """Point ``call`` at its template: a ``templateRef`` one at hand, or (inside a copied
        template, ``home`` its WorkflowTemplate) one of that WorkflowTemplate's by name."""
        ref = call.get("templateRef")
        if isinstance(ref, dict):
            key = (bool(ref.get("clusterScope")), str(ref.get("name") or ""))
            name = self._copy(key, str(ref.get("template") or ""))
            if name is not None:
                del call["templateRef"]
                call["template"] = name
        elif home is not None and isinstance(call.get("template"), str):
            call["template"] = self._copy(home, call["template"]) or call["template"]
        if home is not None and isinstance(call.get("onExit"), str):  # hooks are calls too
            call["onExit"] = self._copy(home, call["onExit"]) or call["onExit"]

    def _copy(self, home: tuple[bool, str], template: str) -> str | None:
        """The name of the copy of ``template`` of the object ``home`` (made on first use),
        or None when that object or template is not at hand."""
        key = (*home, template)
        if key in self.copied:
            return self.copied[key]
        owner = self.at_hand.get(home)
        found = [
            t
            for t in spec_of(owner or {}).get("templates") or []
            if isinstance(t, dict) and t.get("name") == template
        ]
        if not found:
            return None
        name = template if template not in self.taken else f"{home[1]}.{template}"
        n = 2
        while name in self.taken:
            name, n = f"{home[1]}.{template}-{n}", n + 1
        self.taken.add(name)
        self.copied[key] = name
        body = copy.deepcopy(found[0])
        body["name"] = name
        self.templates.append(body)
        for _, call in _template_calls(body, ""):
            self._point(call, home)
        return name


def merge_spec(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` (a Workflow's spec) merged over ``base`` (its template's), as Kubernetes'
    strategic merge patch merges them for Argo (see the module docstring)."""
    merged = _merge(base, patch, "")
    assert isinstance(merged, dict)
    return merged


def _merge(base: Any, patch: Any, field: str) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if v is None or v == []:  # what Go leaves out of the patch (omitempty)
                continue
            out[k] = _merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return out
    key = _MERGE_KEYS.get(field)
    if key and isinstance(base, list) and isinstance(patch, list) and _keyed(base + patch, key):
        out_list = copy.deepcopy(base)
        at = {item[key]: i for i, item in enumerate(out_list)}
        for item in patch:
            if item[key] in at:
                out_list[at[item[key]]] = _merge(out_list[at[item[key]]], item, "")
            else:
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _keyed(items: list[Any], key: str) -> bool:
    return all(isinstance(i, dict) and isinstance(i.get(key), str) for i in items)


_WORKFLOW_PARAMETER = re.compile(r"^\s*workflow\.parameters\.([\w-]+)\s*$")


def check_parameter_references(where: str, manifest: Mapping[str, Any], hint: str) -> None:
    """Every ``{{workflow.parameters.NAME}}`` names a declared parameter (or ``json``);
    ``where`` starts the error, ``hint`` ends it (how to declare one)."""
    declared = declared_parameters(manifest) | {"json"}
    found: dict[str, str] = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, str):
            for m in PLACEHOLDER.finditer(node):
                ref = None if m.group(1) else _WORKFLOW_PARAMETER.match(m.group(2))
                if ref and ref.group(1) not in declared:
                    found.setdefault(ref.group(1), where)
        elif isinstance(node, list | dict):
            for v in node.values() if isinstance(node, dict) else node:
                walk(v, where)

    for t in spec_of(manifest).get("templates") or []:
        if isinstance(t, dict):
            walk(t, f"template {t.get('name')}")
    if found:
        refs = "; ".join(f"{{{{workflow.parameters.{n}}}}} in {w}" for n, w in found.items())
        raise PermanentError(
            f"{where}: {refs}: not a parameter this workflow declares (it takes: "
            f"{', '.join(sorted(declared - {'json'})) or 'none'}); {hint}"
        )


def declared_parameters(manifest: Mapping[str, Any]) -> set[str]:
    """The workflow parameters a compiled manifest declares (``spec.arguments.parameters``)."""
    params = (spec_of(manifest).get("arguments") or {}).get("parameters") or []
    return {str(p["name"]) for p in params if isinstance(p, dict) and "name" in p}


def parameters_taken(declared: set[str]) -> str:
    """What a workflow declaring ``declared`` takes, for a refusal of another ``-p`` name."""
    if not declared:
        return "this workflow takes no parameters (it declares no spec.arguments.parameters)"
    return f"this pipeline takes: {', '.join(sorted(declared))}"
