"""``gangway ls``: look at data, checkpoints and outputs by URI."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gangway import storage
from gangway.cli._output import console, human_bytes
from gangway.errors import NotFoundError

__all__ = ["ls"]


def ls(
    uri: Annotated[str, typer.Argument(help="file:///path, a local path, or s3://bucket/prefix")],
) -> None:
    """List the objects under URI with their sizes, and whether the directory is published."""
    objects = storage.list_objects(uri)
    if not objects:
        raise NotFoundError(f"{uri}: nothing there (no object and no prefix); check the URI")
    table = Table(show_header=True, header_style="bold")
    table.add_column("object")
    table.add_column("size", justify="right")
    for obj in objects:
        table.add_row(obj.key or uri, human_bytes(obj.size))
    console.print(table)
    manifest = storage.read_manifest(uri)
    total = human_bytes(sum(o.size for o in objects))
    state = f"published, digest {manifest.digest}" if manifest else "no manifest (not published)"
    noun = "object" if len(objects) == 1 else "objects"
    console.print(f"{len(objects)} {noun}, {total}; {state}")
