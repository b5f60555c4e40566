"""A small cacheable step for the caching tests: it reads the files under ``--data`` (a
``file://`` directory), writes them upper-cased to ``OUT/result.txt`` and outputs ``OUT``;
every real run appends a line to ``--log``, so a cached one shows by its absence."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from pydantic import Field

from gangway import storage
from gangway.step import main_wrapper
from gangway.step.caching import Cache, Place
from gangway.step.interface import DatasetUri, Inputs, Outputs, StepSpec


class WorkInputs(Inputs):
    data: DatasetUri = Field(description="the files to read")
    out: str = Field(description="where the result goes (a file:// URI)")
    log: Annotated[str, Place(), Field(description="a file each real run appends a line to")]


class WorkOutputs(Outputs):
    result: str = Field(description="the URI of the result")


WORK = StepSpec("work", "tests.helpers.cached_step", WorkInputs, WorkOutputs, cache=Cache("720h"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    WORK.add_arguments(parser)
    args = parser.parse_args(argv)
    data = storage.parse(args.data).path
    text = "".join(p.read_text() for p in sorted(data.iterdir()))
    storage.write_bytes(storage.join(args.out, "result.txt"), text.upper().encode())
    with Path(args.log).open("a") as log:
        log.write("ran\n")
    WORK.write_outputs(args, WorkOutputs(result=args.out))
    return 0


if __name__ == "__main__":
    main_wrapper(main)()
