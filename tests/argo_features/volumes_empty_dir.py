"""An emptyDir volume belongs to one pod: a task writes to it and reads it back, and the next
task, mounting an emptyDir of the same name, starts with it empty."""

from hera.workflows import DAG, EmptyDirVolume, Task, Workflow

from tests.argo_features._build import sh

CHECK = "test -f /mnt/gw-empty/note && echo inherited || echo fresh"

with Workflow(name="volumes-empty-dir", entrypoint="main") as w:
    scratch = EmptyDirVolume(name="scratch", mount_path="/mnt/gw-empty")
    write = sh(
        "write", "echo mine > /mnt/gw-empty/note && cat /mnt/gw-empty/note", volumes=[scratch]
    )
    check = sh("check", CHECK, volumes=[scratch])
    with DAG(name="main"):
        Task(name="write", template=write)
        Task(name="check", template=check, depends="write")
