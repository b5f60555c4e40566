"""Artifacts kept under the run's ``storage-root`` (``file://`` or ``s3://``): a file with
Argo's default archive (tar+gzip) and a directory with ``archive: none``, each read by the next
step."""

from hera.workflows import DAG, Artifact, NoneArchiveStrategy, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(
    name="artifacts-storage-root",
    entrypoint="main",
    arguments=[Parameter(name="storage-root", value="")],
) as w:
    make = sh(
        "make",
        "echo one > /tmp/gw-sr-file.txt; mkdir -p /tmp/gw-sr-dir/sub;"
        " echo two > /tmp/gw-sr-dir/sub/b",
        outputs=[
            Artifact(name="file", path="/tmp/gw-sr-file.txt"),
            Artifact(name="tree", path="/tmp/gw-sr-dir", archive=NoneArchiveStrategy()),
        ],
    )
    read = sh(
        "read",
        "cat /tmp/gw-sr-in.txt /tmp/gw-sr-in-dir/sub/b | tr '\\n' ' '",
        inputs=[
            Artifact(name="file", path="/tmp/gw-sr-in.txt"),
            Artifact(name="tree", path="/tmp/gw-sr-in-dir"),
        ],
    )
    with DAG(name="main"):
        made = Task(name="make", template=make)
        Task(
            name="read",
            template=read,
            depends="make",
            arguments=[made.get_artifact("file"), made.get_artifact("tree")],
        )
