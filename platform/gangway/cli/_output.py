"""Output shared by the command groups: the consoles, values shortened to fit a column, and the
files that ``-o`` options write.

Nothing here assumes a wide terminal: in a pipe rich renders 80 columns (or ``COLUMNS``) and
writes no colour codes.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from gangway.errors import PermanentError

__all__ = [
    "Fitted",
    "console",
    "err_console",
    "human_bytes",
    "output_dir",
    "output_file",
    "shorten",
    "wrapped",
    "write_output",
]

console = Console()
err_console = Console(stderr=True)
for _c in (console, err_console):
    # Rich fixes a console's width from COLUMNS when it is made (here, at import); the width
    # is read at each print instead, from COLUMNS or the terminal as they are then — what a
    # command run in a long-lived process (a notebook, a test) is given.
    _c._width = None


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def wrapped(text: str, width: int, *, first: str, rest: str) -> str:
    """``text`` wrapped between words to ``width`` (at most), after ``first`` on its first line
    and ``rest`` on the others; a word is never split, even one longer than a line (a URI
    stays whole to copy)."""
    return textwrap.fill(
        text,
        max(width, len(rest) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def shorten(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters: whole when it fits; a path or URI
    keeps its end from a ``/`` (``…/checkpoints/train/step-00020``: what tells two apart), or
    when even its last part is too long, its start; other text keeps its start. A cut shows
    as ``…``."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if " " not in text and "/" in text:
        cut = text.find("/", len(text) - width + 1)
        if 0 <= cut < len(text) - 1:
            return "…" + text[cut:]
    return text[: width - 1] + "…"


class Fitted:
    """Lines of ``(label, value)`` that shorten their value to the width they get
    (:func:`shorten`) instead of wrapping: a table cell that stays one line per item, however
    narrow the table."""

    LEAST = 16
    """The narrowest a table may make it (narrower lines are never shortened)."""

    def __init__(self, lines: Sequence[tuple[str, str]]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for label, value in self.lines:
            room = max(options.max_width - cell_len(label), 1)
            yield Text(label + shorten(value, room), no_wrap=True, overflow="ellipsis")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        longest = max((cell_len(a) + len(" ".join(b.split())) for a, b in self.lines), default=0)
        return Measurement(min(longest, self.LEAST), longest)


def output_file(path: Path, flag: str = "-o") -> Path:
    """Where ``flag PATH`` writes its file (through a link, to its target), refused in one line
    that says what to do when it cannot take one: an empty path, a directory or other non-file,
    a file not writable, or a directory on the way that is a file or not writable. Checked
    before any work, so minutes of it are not lost. Missing directories are fine:
    :func:`write_output` makes them."""
    if str(path) in ("", "."):
        raise PermanentError(f"{flag}: give a file path")
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not target.is_file():
        raise PermanentError(f"{flag} {path}: not a regular file; give a file path")
    if target.exists() and not os.access(target, os.W_OK):
        raise PermanentError(f"{flag} {path}: not writable; give a path you can write to")
    _can_make(target.parent, f"{flag} {path}")
    return target


def output_dir(path: Path, flag: str) -> Path:
    """Where ``flag DIR`` writes its files: a directory, or one that can be made; else one
    line that says what to do, before any work."""
    if path.exists() and not path.is_dir():
        raise PermanentError(f"{flag} {path}: not a directory; give a directory")
    if path.is_symlink() and not path.exists():
        raise PermanentError(f"{flag} {path}: a link to nothing; give a directory")
    _can_make(path, f"{flag} {path}")
    return path


def write_output(path: Path, text: str, flag: str = "-o") -> Path:
    """Write ``text`` to ``flag PATH`` whole or not at all (a temporary beside it, renamed into
    place), making missing directories (as ``mkdir -p``), after :func:`output_file`'s checks;
    the file written. An error is one line naming the path."""
    from gangway.storage import write_atomic

    target = output_file(path, flag)
    write_atomic(target, text.encode())
    return target


def _can_make(directory: Path, what: str) -> None:
    """``directory`` exists, or its nearest existing ancestor is a directory this process can
    write into."""
    parent = directory
    while not os.path.lexists(parent):
        parent = parent.parent
    if not parent.is_dir():
        kind = "a file, not a directory" if parent.is_file() else "not a directory"
        raise PermanentError(f"{what}: {parent} is {kind}; give a path in a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermanentError(f"{what}: {parent} is not writable; give a directory you can write to")
