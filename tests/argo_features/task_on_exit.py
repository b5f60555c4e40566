"""``onExit`` on tasks: the handler runs after its task whatever the task's outcome; the
failed task still fails the workflow."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="task-on-exit", entrypoint="main") as w:
    ok = sh("ok", "echo fine")
    bad = sh("bad", "exit 1")
    tidy = sh("tidy", "echo tidied")
    with DAG(name="main"):
        Task(name="good", template=ok, on_exit=tidy)
        Task(name="broken", template=bad, on_exit=tidy)
