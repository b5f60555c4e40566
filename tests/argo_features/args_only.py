"""A container with ``args`` and no ``command``: Argo runs the args with the image's
entrypoint, which a local run cannot know — refused before anything runs, naming the image
and the template."""

from hera.workflows import DAG, Container, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="args-only", entrypoint="main") as w:
    first = sh("first", "echo first")
    say = Container(name="say", image="docker/whalesay:latest", args=["echo", "hello"])
    with DAG(name="main"):
        Task(name="first", template=first)
        Task(name="say", template=say, depends="first")
