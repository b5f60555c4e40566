"""A directory output artifact at ``/tmp/`` (trailing slash): the container's ``/tmp``, with
a volume mounted inside it, is collected whole and arrives as a directory."""

from hera.workflows import DAG, Artifact, EmptyDirVolume, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="dir-artifact-tmp", entrypoint="main") as w:
    scratch = EmptyDirVolume(name="gw-vol", mount_path="/tmp/gw-vol")
    make = sh(
        "make",
        "echo a > /tmp/gw-a.txt && echo v > /tmp/gw-vol/v.txt",
        volumes=[scratch],
        outputs=[Artifact(name="tmpdir", path="/tmp/")],
    )
    show = sh(
        "show",
        "cd /gw-in && find . -type f | sort | tr '\\n' ' ' && cat gw-a.txt gw-vol/v.txt",
        inputs=[Artifact(name="tmpdir", path="/gw-in")],
    )
    with DAG(name="main"):
        Task(name="make", template=make)
        Task(
            name="show",
            template=show,
            depends="make",
            arguments=[Artifact(name="tmpdir", from_="{{tasks.make.outputs.artifacts.tmpdir}}")],
        )
