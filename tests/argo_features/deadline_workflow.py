"""``activeDeadlineSeconds: 1`` on the workflow: the running step is stopped and the workflow
fails after about a second; the task after it never runs; the exit handler still runs."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(
    name="deadline-workflow", entrypoint="main", active_deadline_seconds=1, on_exit="bye"
) as w:
    sh("bye", "echo bye {{workflow.status}}")
    slow = sh("slow", "sleep 30")
    with DAG(name="main"):
        Task(name="slow", template=slow)
        Task(name="later", template=sh("later", "echo later"), depends="slow")
