"""Inline templates (``inline:`` on a DAG task or a step) are checked before anything runs as
named ones are: an inline container with only ``args``, and an inline DAG whose own inline
task runs a command this machine does not have, are both refused up front, each with its
path."""

from hera.workflows import Container, Step, Steps, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

ARGS_ONLY = Container(image="docker/whalesay:latest", args=["hello"])
NESTED = m.Template(
    dag=m.DAGTemplate(
        tasks=[
            m.DAGTask(
                name="moo",
                inline=m.Template(
                    container=m.Container(image="docker/whalesay", command=["cowsay-gw-missing"])
                ),
            )
        ]
    )
)

with Workflow(name="inline-checked", entrypoint="main") as w:
    first = sh("first", "echo first")
    with Steps(name="main"):
        Step(name="first", template=first)
        Step(name="say", inline=ARGS_ONLY)
        Step(name="nested", inline=NESTED)
