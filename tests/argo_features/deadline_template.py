"""``activeDeadlineSeconds: 1`` on a template whose step sleeps 30 s: the node is stopped and
fails after about a second."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="deadline-template", entrypoint="main") as w:
    slow = sh("slow", "sleep 30", active_deadline_seconds=1)
    with DAG(name="main"):
        Task(name="slow", template=slow)
