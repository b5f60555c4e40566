"""The same file saved twice: with the default archive (tar + gzip, stored as ``NAME.tgz``) and
with ``archive: none`` (stored as is); the consumer receives the same file either way."""

from hera.workflows import DAG, Artifact, NoneArchiveStrategy, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="artifacts-archive", entrypoint="main") as w:
    make = sh(
        "make",
        "mkdir -p /tmp/gw-arch && echo same-bytes > /tmp/gw-arch/data.txt",
        outputs=[
            Artifact(name="packed", path="/tmp/gw-arch/data.txt"),
            Artifact(name="plain", path="/tmp/gw-arch/data.txt", archive=NoneArchiveStrategy()),
        ],
    )
    both = sh(
        "both",
        "echo $(cat /tmp/gw-arch-in/packed.txt) $(cat /tmp/gw-arch-in/plain.txt)",
        inputs=[
            Artifact(name="packed", path="/tmp/gw-arch-in/packed.txt"),
            Artifact(name="plain", path="/tmp/gw-arch-in/plain.txt"),
        ],
    )
    with DAG(name="main"):
        Task(name="make", template=make)
        Task(
            name="both",
            template=both,
            depends="make",
            arguments=[
                Artifact(name="packed", from_="{{tasks.make.outputs.artifacts.packed}}"),
                Artifact(name="plain", from_="{{tasks.make.outputs.artifacts.plain}}"),
            ],
        )
