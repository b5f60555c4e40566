"""Checking, at compile time, that a step's module can be imported as it will be in the image."""

from __future__ import annotations

from gangway.errors import PermanentError, closest

__all__ = ["check_module"]


def check_module(step_name: str, module: str) -> None:
    """The module a step runs must be importable here, as it will be in the image: a typo is
    a compile error naming the step, not a failure minutes into a run."""
    import importlib.util
    import pkgutil

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return
    parent, _, _ = module.rpartition(".")
    known: list[str] = []
    try:
        spec = importlib.util.find_spec(parent) if parent else None
        where = spec.submodule_search_locations if spec else None
        known = [f"{parent}.{m.name}" for m in pkgutil.iter_modules(where)] if where else []
    except (ImportError, ValueError):
        pass
    near = closest(module, known)
    hint = f"; did you mean {near!r}?" if near else "; check module= (python -m MODULE)"
    raise PermanentError(f"step {step_name!r}: module {module!r} cannot be imported{hint}")
