"""``gangway resume``: let a suspended step of a local run go on, as ``argo resume`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gangway.cli._output import console
from gangway.cli.options import StateDirOpt, parse_params

__all__ = ["resume_cmd"]


def resume_cmd(
    workflow: Annotated[str, typer.Argument(help="the local run's workflow name")],
    node: Annotated[
        str | None,
        typer.Option(help="resume only this node (default: every suspended node)"),
    ] = None,
    supply: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="a value for a suspend step's supplied output: --set name=value"
        ),
    ] = None,
    state_dir: StateDirOpt = Path(".gangway"),
) -> None:
    """Resume WORKFLOW's suspended step(s), running under `gangway run` (another terminal)."""
    from gangway.local import resume

    path = resume(state_dir, workflow, node, parse_params(supply))
    what = f"node {node}" if node else "every suspended node"
    console.print(f"resumed {what} of {workflow} ({path})", highlight=False)
