"""``initContainers`` run to completion before the main container; the init container writes a
file into an emptyDir that the main container reads."""

from hera.workflows import Container, EmptyDirVolume, UserContainer, Workflow
from hera.workflows import models as m

from tests.argo_features._build import IMAGE

with Workflow(name="init-containers", entrypoint="greet") as w:
    Container(
        name="greet",
        image=IMAGE,
        command=["sh", "-c", "cat /mnt/gw-init/greeting"],
        volumes=[EmptyDirVolume(name="seed", mount_path="/mnt/gw-init")],
        init_containers=[
            UserContainer(
                name="prepare",
                image=IMAGE,
                command=["sh", "-c", "echo prepared-by-init > /mnt/gw-init/greeting"],
                volume_mounts=[m.VolumeMount(name="seed", mount_path="/mnt/gw-init")],
            )
        ],
    )
