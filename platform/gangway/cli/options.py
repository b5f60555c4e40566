"""What several commands read the same way: a pipeline or manifest file, ``-p name=value``,
the local state directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gangway.assignments import parse_assignments
from gangway.errors import PermanentError

__all__ = ["ParamOpt", "PipelineArg", "StateDirOpt", "load_manifests", "parse_params"]

PipelineArg = Annotated[Path, typer.Argument(help="a pipeline file, e.g. pipelines/x.py")]
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
    """A pipeline file compiled (``.py``), or the Kubernetes objects of a YAML file."""
    if target.suffix == ".py":
        from gangway.compiler import compile_documents

        return compile_documents(target)
    if not target.is_file():
        raise PermanentError(f"{target}: no such file (give a pipeline .py or a YAML manifest)")
    try:
        docs = [d for d in yaml.safe_load_all(target.read_text()) if d]
    except yaml.YAMLError as e:
        raise PermanentError(f"{target}: not valid YAML: {e}") from None
    bad = [i for i, d in enumerate(docs) if not isinstance(d, dict)]
    if bad:
        raise PermanentError(f"{target}: document {bad[0] + 1} is not a Kubernetes object")
    return docs
