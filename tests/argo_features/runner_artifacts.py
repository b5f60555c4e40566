"""Hera's runner with Pydantic-style annotations: one step returns an artifact, the next takes
it twice — at Hera's default input path and at a path of its own — and returns a parameter.
Hera's runner reads and writes those paths at run time, inside its own code."""

from pathlib import Path
from typing import Annotated

from hera.workflows import (
    DAG,
    Artifact,
    Parameter,
    RunnerScriptConstructor,
    Task,
    Workflow,
    script,
)


@script(constructor=RunnerScriptConstructor(), image="python:3.11")
def produce(n: int) -> Annotated[str, Artifact(name="data")]:
    return "ab" * n


@script(constructor=RunnerScriptConstructor(), image="python:3.11")
def consume(
    data: Annotated[Path, Artifact(name="data")],
    copy: Annotated[str, Artifact(name="copy", path="/tmp/gw-runner-copy.txt", loader=None)],
) -> Annotated[int, Parameter(name="size")]:
    return len(data.read_text()) + len(Path(copy).read_text())


with Workflow(name="runner-artifacts", entrypoint="main") as w, DAG(name="main"):
    made = produce(arguments={"n": 3})
    assert isinstance(made, Task)
    consume(
        arguments=[
            made.get_artifact("data"),
            Artifact(name="copy", from_="{{tasks.produce.outputs.artifacts.data}}"),
        ],
        depends="produce",
    )
