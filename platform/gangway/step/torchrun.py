"""torchrun's command line, read without running it: the counts a gang pod starts with.
Pure, so ``gangway lint`` and the gang launcher (:mod:`gangway.step.launch`) share one rule."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NPROC_FLAGS", "NPROC_WORDS", "config_errors", "count_problem", "processes_per_pod"]


def _flag(argv: Sequence[str], *names: str) -> str | None:
    """The value of a torchrun flag (``--x=v`` or ``--x v``), or None when absent."""
    for i, a in enumerate(argv):
        if a in ("-m", "--module") or not a.startswith("-"):
            break  # the training module's own arguments start here
        key, eq, value = a.partition("=")
        if key in names:
            if eq:
                return value
            return argv[i + 1] if i + 1 < len(argv) else ""
    return None


NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")
NPROC_FLAGS = ("--nproc-per-node", "--nproc_per_node")
"""How torchrun spells its processes-per-pod flag."""


def count_problem(flag: str, value: str) -> str | None:
    """What is wrong with the value of torchrun's ``--nnodes`` or ``--nproc-per-node`` (None
    when it is fine, or for another flag): torchrun asserts on a count below 1, and an
    assertion reads as a lost peer."""
    flag = flag.replace("_", "-")
    if flag == "--nnodes":
        if all(p.isdigit() and int(p) > 0 for p in value.split(":")):
            return None
        return "must be a positive number of pods (or MIN:MAX)"
    if flag == "--nproc-per-node":
        if value in NPROC_WORDS or (value.isdigit() and int(value) > 0):
            return None
        return (
            f"must be a positive number of processes per pod (or one of {', '.join(NPROC_WORDS)})"
        )
    return None


def config_errors(argv: Sequence[str]) -> list[str]:
    """What is wrong with the gang's own settings (permanent: a restart cannot fix them)."""
    errors = []
    for flag, names in (("--nnodes", ("--nnodes",)), ("--nproc-per-node", NPROC_FLAGS)):
        value = _flag(argv, *names)
        problem = None if value is None else count_problem(flag, value)
        if problem is not None:
            errors.append(f"{flag}={value!r}: {problem}")
    return errors


def processes_per_pod(argv: Sequence[str]) -> int:
    """``--nproc-per-node`` as a number (1 when absent or a word like ``gpu``)."""
    value = _flag(argv, *NPROC_FLAGS) or "1"
    return int(value) if value.isdigit() else 1
