"""``gangway manifests render``: the cluster side, rendered from the platform config."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from gangway.cli._help import command_group
from gangway.cli._output import console, output_dir
from gangway.errors import PermanentError

__all__ = ["app"]

app = command_group(
    help="Cluster-side manifests (Volcano queues, priorities, topology, RBAC, admission "
    "policies, Argo and MLflow) rendered from the platform config.",
    no_args_is_help=True,
)


@app.command("render")
def render_cmd(
    config: Annotated[
        Path | None,
        typer.Option(help="the platform config [env: GANGWAY_CONFIG; default: the example]"),
    ] = None,
    output: Annotated[
        Path,
        typer.Option(
            "-o", "--output", help="write the files under this directory (made if missing)"
        ),
    ] = Path("manifests"),
    diff: Annotated[
        Path | None,
        typer.Option(
            help="write nothing: show how DIR differs from what the config renders "
            "(exit 1 when it does; a check for CI)"
        ),
    ] = None,
) -> None:
    """Render a kustomize base and one overlay per cluster from the platform config.

    Deterministic: the same config gives the same bytes. Install a cluster with
    `kubectl apply -k manifests/overlays/NAME`. Files rendered earlier that the config no
    longer makes are removed; hand-written files beside them are left alone.
    """
    from gangway.config import load_config
    from gangway.render import differences, render, write

    files = render(load_config(config))
    if diff is not None and diff.exists() and not diff.is_dir():
        raise PermanentError(f"--diff {diff}: not a directory")
    if diff is not None and not diff.is_dir():
        raise PermanentError(f"--diff {diff}: no such directory (render into it with -o first)")
    if diff is not None:
        changed = differences(files, diff)
        for rel in changed:
            old = (
                (diff / rel).read_text().splitlines(keepends=True) if (diff / rel).is_file() else []
            )
            new = files.get(rel, "").splitlines(keepends=True)
            typer.echo(
                "".join(difflib.unified_diff(old, new, f"{diff}/{rel}", f"rendered/{rel}")),
                nl=False,
            )
        console.print(f"{len(changed)} of {len(files)} file(s) differ from {diff}")
        if changed:
            raise typer.Exit(1)
        return
    output_dir(output, "-o")
    try:
        changed = write(files, output)
    except OSError as e:  # e.g. a file where a directory must be
        raise PermanentError(f"-o {output}: cannot write there: {e.strerror or e}") from None
    for rel in changed:
        console.print(f"{'wrote  ' if rel in files else 'removed'} {output / rel}", highlight=False)
    console.print(f"{len(files)} file(s) under {output}: {len(changed)} changed", highlight=False)
