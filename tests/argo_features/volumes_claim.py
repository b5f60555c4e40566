"""``volumeClaimTemplates``: one volume for the whole workflow, mounted by two tasks; what the
first writes, the second reads."""

from hera.workflows import DAG, Task, Volume, Workflow

from tests.argo_features._build import sh

with Workflow(name="volumes-claim", entrypoint="main") as w:
    shared = Volume(name="shared", size="1Mi", mount_path="/mnt/gw-claim")
    write = sh("write", "echo kept-on-the-claim > /mnt/gw-claim/note", volumes=[shared])
    read = sh("read", "cat /mnt/gw-claim/note", volumes=[shared])
    with DAG(name="main"):
        Task(name="write", template=write)
        Task(name="read", template=read, depends="write")
