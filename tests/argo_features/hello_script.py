"""A lone Hera ``@script`` as the entrypoint."""

from hera.workflows import Workflow, script


@script(image="python:3.11")
def greet() -> None:
    print("hello from a script")


with Workflow(name="hello-script", entrypoint="greet") as w:
    greet()
