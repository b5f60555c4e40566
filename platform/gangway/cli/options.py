"""What several commands read the same way: a pipeline or manifest file, ``-p name=value``,
the local state directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gangway.name_values import parse_assignments

__all__ = ["ParamOpt", "PipelineArg", "StateDirOpt", "load_manifests", "parse_params"]

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
