"""A step's entry point: errors become one clear line and the exit code of the contract
(:mod:`gangway.contract`), results become one JSON line and an output parameter file; and
reading that ``error:`` line back from a step's log (:func:`error_summary`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gangway.contract import ENV_EXIT_DIR, EXIT_PERMANENT
from gangway.errors import GangwayError
from gangway.name_values import parse_assignments

__all__ = ["emit", "error_summary", "main_wrapper", "parse_overrides"]


def main_wrapper(main: Callable[[Sequence[str] | None], int | None]) -> Callable[[], NoReturn]:
    """Wrap ``main(argv)`` so Gangway errors print one clear line and exit with their code."""

    def run() -> NoReturn:
        code = EXIT_PERMANENT  # an unexpected exception is a bug: permanent
        from gangway.step.metrics import serve_pod

        serve_pod()  # on a cluster, a container step's pod serves its own metrics
        try:
            code = main(None) or 0
        except GangwayError as e:
            print(f"error: {e}", file=sys.stderr)
            code = e.exit_code
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            code = 130
        finally:
            reported = _report_exit(code)
        if reported or "TORCHELASTIC_RUN_ID" in os.environ:
            # A rank of a gang (under the launcher, or any torchrun) leaves at once: tearing
            # down the interpreter can deadlock in the gloo process group's destructor (its
            # worker thread waits for the GIL the destructor holds), leaving the pod running
            # forever. Everything is written.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        sys.exit(code)

    return run


def emit(result: dict[str, Any], out: Path | None) -> None:
    """Print a step's result as one JSON line and, when asked, write it to ``out``.

    ``out`` is where an Argo output parameter reads from (``valueFrom.path``).
    """
    text = json.dumps(result, sort_keys=True)
    print(text, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``--set key=value`` options (``["a=1", "b=x"]`` → ``{"a": "1", "b": "x"}``)."""
    return parse_assignments(items, flag="--set", example="--set steps=200")


def _report_exit(code: int) -> bool:
    """Under the gang launcher (:mod:`gangway.step.launch`), tell it how this rank ended (its
    exit code); True when it was told."""
    exit_dir = os.environ.get(ENV_EXIT_DIR)
    if not exit_dir:
        return False
    rank = os.environ.get("RANK", "0")
    Path(exit_dir, f"rank-{rank}").write_text(str(code))
    return True


def error_summary(lines: list[str]) -> str | None:
    """The last ``error:`` line of a log, with the items of a multi-line one (indented lines
    after a line ending in ':'), and nothing of a traceback that may follow."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    if not starts:
        return None
    i = starts[-1]
    detail = [lines[i]]
    if lines[i].endswith(":"):
        for ln in lines[i + 1 : i + 6]:
            if not ln.startswith("  ") or ln.lstrip().startswith("File "):
                break
            detail.append(ln.strip())
    return " ".join(detail)[:400]
