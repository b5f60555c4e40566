"""The templates of a workflow and the containers Argo puts in each one's pod, each with the
field path it is written at — so that the platform's pod rules see every container.

* **Templates**: those of ``spec.templates``, and the ``inline`` template of each DAG task or
  step (any depth), at ``…dag.tasks[j].inline`` / ``…steps[g][k].inline``.
* **Containers**: the main container (``container`` / ``script``), or every container of a
  ``containerSet``; every ``sidecars`` and ``initContainers`` entry.
* **Template defaults**: Argo merges ``spec.templateDefaults`` into every template before it
  runs it (a strategic merge, the template's own values winning: maps merged key by key, the
  ``sidecars`` and ``initContainers`` lists entry by entry by name, other lists replaced); the
  type-specific field (``container``, ``script`` …) only reaches a template of that type. A
  value a template gets from the defaults is reported at its path in ``spec.templateDefaults``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gangway.argo.template_defaults import NAMED_LISTS, merge_defaults

__all__ = ["PodContainer", "every_template", "pod_containers", "source_path"]


def every_template(spec: Mapping[str, Any], base: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(path, template)`` for each template of ``spec``, inline ones included."""
    for i, t in enumerate(spec.get("templates") or []):
        if isinstance(t, Mapping):
            yield from _with_inline(t, f"{base}.templates[{i}]")


def _with_inline(t: Mapping[str, Any], tp: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield tp, t
    calls = [
        (f"{tp}.dag.tasks[{j}]", task)
        for j, task in enumerate((t.get("dag") or {}).get("tasks") or [])
    ]
    calls += [
        (f"{tp}.steps[{g}][{k}]", step)
        for g, group in enumerate(t.get("steps") or [])
        for k, step in enumerate(group or [])
    ]
    for path, call in calls:
        if isinstance(call, Mapping) and isinstance(call.get("inline"), Mapping):
            yield from _with_inline(call["inline"], f"{path}.inline")


@dataclass(frozen=True)
class PodContainer:
    """A container of a template's pod, as Argo runs it (the defaults merged in)."""

    container: Mapping[str, Any]
    path: str
    """Where it is written: in the template, else in ``spec.templateDefaults``."""
    own: Mapping[str, Any] | None
    """What the template itself writes of it (None: all of it comes from the defaults)."""
    default_path: str | None = None
    """Where the defaults write it (None: they do not) ..."""
    default: Mapping[str, Any] | None = None
    """... and what they write."""
    main: bool = False


def pod_containers(
    t: Mapping[str, Any], tp: str, defaults: Mapping[str, Any], dp: str
) -> list[PodContainer]:
    """Every container of template ``t``'s pod (none for a template without a pod of user
    containers); ``defaults`` are ``spec.templateDefaults``, at ``dp``."""
    merged = merge_defaults(defaults, t)
    out: list[PodContainer] = []
    for key in ("container", "script"):
        if key in t:
            own = t.get(key) or {}
            d = defaults.get(key) if isinstance(defaults.get(key), Mapping) else None
            dpath = f"{dp}.{key}" if d is not None else None
            merged_c = merged.get(key) or {}
            out.append(PodContainer(merged_c, f"{tp}.{key}", own, dpath, d, main=True))
    if "containerSet" in t:
        for k, c in enumerate((t.get("containerSet") or {}).get("containers") or []):
            out.append(PodContainer(c, f"{tp}.containerSet.containers[{k}]", c))
    if not out:
        return []
    for key in NAMED_LISTS:
        out += _named(key, t, tp, defaults, dp, merged)
    return out


def _named(
    key: str,
    t: Mapping[str, Any],
    tp: str,
    defaults: Mapping[str, Any],
    dp: str,
    merged: Mapping[str, Any],
) -> list[PodContainer]:
    def index(items: Any) -> dict[Any, int]:
        return {c.get("name"): i for i, c in enumerate(items or []) if isinstance(c, Mapping)}

    mine, theirs = index(t.get(key)), index(defaults.get(key))
    out = []
    for c in merged.get(key) or []:
        if not isinstance(c, Mapping):
            continue
        name = c.get("name")
        own = (t.get(key) or [])[mine[name]] if name in mine else None
        d = (defaults.get(key) or [])[theirs[name]] if name in theirs else None
        dpath = f"{dp}.{key}[{theirs[name]}]" if name in theirs else None
        path = f"{tp}.{key}[{mine[name]}]" if name in mine else dpath
        out.append(PodContainer(c, str(path), own, dpath, d))
    return out


def _is_set(obj: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return False
        obj = obj[part]
    return True


def source_path(pc: PodContainer, path: str) -> str:
    """``path`` (a finding's, under ``pc.path``) where the value it is about is written: in
    the defaults when the template does not write that field and the defaults do."""
    prefix = pc.path + "."
    if pc.default is None or pc.own is None or not path.startswith(prefix):
        return path
    field = path[len(prefix) :]
    if _is_set(pc.own, field) or not _is_set(pc.default, field):
        return path
    return f"{pc.default_path}.{field}"
