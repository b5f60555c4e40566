"""What several commands read the same way: a pipeline or manifest file, ``-p name=value``,
the local state directory, ``--output table|json``, a daemon's ``--interval``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gangway.errors import PermanentError
from gangway.name_values import parse_assignments

if TYPE_CHECKING:
    from gangway.workflows.manifest_files import Submission

__all__ = [
    "NameOpt",
    "Output",
    "OutputOpt",
    "ParamOpt",
    "PipelineArg",
    "StateDirOpt",
    "interval_seconds",
    "load_manifests",
    "parse_params",
    "submission_of",
]

PipelineArg = Annotated[
    Path,
    typer.Argument(
        help="a pipeline file: a Hera .py file (e.g. pipelines/x.py) or YAML manifests (a "
        "Workflow, WorkflowTemplate or CronWorkflow, and the WorkflowTemplates it references; "
        "several documents in one file)"
    ),
]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("-p", "--param", help="override a workflow parameter: -p name=value"),
]
NameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        help="the object to use when a YAML file holds several: NAME, or Kind/NAME",
    ),
]


class Output(StrEnum):
    """How a command prints what it decided: tables for people, JSON for scripts."""

    TABLE = "table"
    JSON = "json"


OutputOpt = Annotated[
    Output,
    typer.Option(
        "--output",
        help="table: for reading; json: one JSON document on stdout, for scripts",
        case_sensitive=False,
    ),
]
StateDirOpt = Annotated[
    Path, typer.Option(help="local state: storage, logs, the MLflow store, runs to retry")
]


def parse_params(items: list[str] | None) -> dict[str, str]:
    """``-p name=value`` options as a mapping."""
    return parse_assignments(items, flag="-p", example="-p train-steps=100")


def load_manifests(target: Path) -> list[dict[str, Any]]:
    """A pipeline file compiled (``.py``), or the Kubernetes objects of a YAML file, each
    checked as ``gangway run`` checks them (:func:`gangway.workflows.compiler.load_documents`)."""
    from gangway.workflows.compiler import load_documents

    return load_documents(target)


def submission_of(target: Path, objs: list[dict[str, Any]], name: str | None) -> Submission:
    """What ``submit`` and ``explain`` act on: a pipeline file's WorkflowTemplate, or the
    object of a YAML file :func:`gangway.workflows.manifest_files.choose_to_submit` picks."""
    from gangway.workflows.manifest_files import Submission, choose_to_submit

    if target.suffix == ".py":
        if name is not None:
            raise PermanentError("--name chooses among a YAML file's objects; a .py file has one")
        return Submission(objs[0], [], objs[0])
    return choose_to_submit(target, objs, name)


def interval_seconds(text: str, what: str, *, least: float = 0.0) -> float:
    """A daemon's ``--interval`` (``gangway exporter``, ``lineage sync --follow``): a duration
    (``30s``, ``2m``, ``1m30s``) or plain seconds (``30``, ``0.5``), more than ``least`` (at
    least it, when it is not 0) and at most a day; ``what`` names what it separates."""
    from gangway.argo.retries import duration_seconds
    from gangway.errors import GangwayError

    try:
        seconds = duration_seconds(text)
    except GangwayError:
        seconds = -1.0
    low = seconds >= least if least else seconds > 0
    if not (low and seconds <= 86_400):
        floor = f"at least {least:g}s" if least else "more than 0"
        raise PermanentError(
            f"--interval {text!r}: give the time between {what} as a duration (30s, 2m, "
            f"1m30s) or seconds, {floor} and at most a day"
        )
    return seconds
