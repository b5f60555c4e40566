"""A ``containerSet`` of three containers ordered by ``dependencies``, sharing an emptyDir
mounted on all of them: the first writes, the second transforms, ``main`` prints (its stdout
is the node's result)."""

from hera.workflows import DAG, ContainerNode, ContainerSet, EmptyDirVolume, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import IMAGE

with Workflow(name="container-set", entrypoint="main") as w:
    with ContainerSet(
        name="trio",
        volumes=[EmptyDirVolume(name="workspace", mount_path="/mnt/gw-set")],
        volume_mounts=[m.VolumeMount(name="workspace", mount_path="/mnt/gw-set")],
    ):
        write = ContainerNode(
            name="write", image=IMAGE, command=["sh", "-c", "echo quiet > /mnt/gw-set/word"]
        )
        shout = ContainerNode(
            name="shout",
            image=IMAGE,
            command=["sh", "-c", "tr a-z A-Z < /mnt/gw-set/word > /mnt/gw-set/loud"],
        )
        show = ContainerNode(name="main", image=IMAGE, command=["sh", "-c", "cat /mnt/gw-set/loud"])
        write >> shout >> show
    with DAG(name="main"):
        Task(name="trio", template="trio")
