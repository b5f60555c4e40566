"""A step's scratch space, locally: ``/gangway`` and Hera's outputs directory become
directories of the step attempt (:mod:`gangway.contract` defines both paths)."""

from __future__ import annotations

from pathlib import Path

from gangway.contract import HERA_OUTPUTS, SCRATCH

__all__ = ["map_scratch"]


def map_scratch(text: str, scratch: Path) -> str:
    """Point ``/gangway/...`` (as a whole argument or after ``=``) and Hera's outputs directory
    at directories of this step attempt."""
    if text == HERA_OUTPUTS or text.startswith(HERA_OUTPUTS + "/"):
        return str(scratch) + "/hera-outputs" + text[len(HERA_OUTPUTS) :]
    if text == SCRATCH or text.startswith(SCRATCH + "/"):
        return str(scratch) + text[len(SCRATCH) :]
    return text.replace("=" + SCRATCH + "/", f"={scratch}/")
