"""``gangway ls``: look at data, checkpoints and outputs by URI."""

from __future__ import annotations

from typing import Annotated

import typer

from gangway import storage
from gangway.cli._output import console, human_bytes
from gangway.errors import NotFoundError

__all__ = ["ls"]


def ls(
    uri: Annotated[str, typer.Argument(help="file:///path, a local path, or s3://bucket/prefix")],
) -> None:
    """List the objects under URI with their sizes, and whether the directory is published.

    One object a line, its size first and its key (relative to URI) whole: a key is never cut,
    so two keys never look the same; a long one runs on past the edge of the screen.
    """
    objects = storage.list_objects(uri)
    if not objects:
        raise NotFoundError(f"{uri}: nothing there (no object and no prefix); check the URI")
    sizes = [human_bytes(obj.size) for obj in objects]
    wide = max(len(s) for s in [*sizes, "size"])
    console.print(f"{'size':>{wide}}  object", style="bold", highlight=False)
    rows = (f"{size:>{wide}}  {obj.key or uri}" for size, obj in zip(sizes, objects, strict=True))
    console.print("\n".join(rows), soft_wrap=True, markup=False, highlight=False)
    manifest = storage.read_manifest(uri)
    total = human_bytes(sum(o.size for o in objects))
    state = f"published, digest {manifest.digest}" if manifest else "no manifest (not published)"
    noun = "object" if len(objects) == 1 else "objects"
    console.print(f"{len(objects)} {noun}, {total}; {state}")
