"""How ``--help`` reads: plain text that fits any width and any pipe.

Help is written once, in docstrings and ``help=`` strings wrapped at the source's line length,
and rendered by click's plain formatter (``rich_markup_mode=None``): every paragraph is
re-flowed to the terminal (at most 80 columns; a pipe gets 80), blank lines keep paragraphs
apart, nothing is boxed, coloured or read as markup, so ``[env: NAME]`` and ``<KEY>`` show as
written and no long word is cut. A paragraph of list items (lines starting ``-``, ``*`` or
``1.``) keeps its lines as written; the commands list shows each command's whole first
paragraph, wrapped, not cut at 45 characters.

Every command group of the CLI is made by :func:`command_group`, so all of them read alike.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["command_group"]

_LIST_ITEM = re.compile(r"\s*([-*•]|\d+[.)])\s")
_VERBATIM = "\b"  # click: a paragraph starting with this line keeps its line breaks


def command_group(**settings: Any) -> typer.Typer:
    """A Typer app (the CLI's or a command group's) whose help renders as described above;
    ``settings`` are Typer's (``help``, ``name``, ``no_args_is_help`` …)."""
    return typer.Typer(cls=_Group, rich_markup_mode=None, **settings)


class _Group(TyperGroup):
    """A command group that prepares its own and each command's help for click's formatter."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.help = _keep_lists(self.help) if self.help else self.help

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and cmd.help:
            if not cmd.short_help:
                cmd.short_help = " ".join(inspect.cleandoc(cmd.help).split("\n\n")[0].split())
            cmd.help = _keep_lists(cmd.help)
        return cmd


def _keep_lists(text: str) -> str:
    """``text`` with each paragraph of list items (two lines or more that start like one)
    marked for click to keep as written."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        f"{_VERBATIM}\n{p}"
        if not p.startswith(_VERBATIM) and sum(map(bool, map(_LIST_ITEM.match, p.splitlines()))) > 1
        else p
        for p in paragraphs
    )
