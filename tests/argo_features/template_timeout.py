"""A leaf's ``timeout``: the pod gets the whole seconds left of it (``3s`` → a 2 s pod, which
fails with Kubernetes' deadline message), ``2s`` leaves no time for a pod (the node errors
"NODE exceeded its deadline"), the value may come from a parameter, and it replaces the
template's ``activeDeadlineSeconds`` (a 1 s deadline does not stop a 1.5 s step under a
``4s`` timeout)."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="template-timeout", entrypoint="main") as w:
    slow = sh(
        "slow",
        "sleep 30",
        inputs=[Parameter(name="limit")],
        timeout="{{inputs.parameters.limit}}",
    )
    tight = sh("tight", "echo never", timeout="2s")
    override = sh("override", "sleep 1.5; echo done", timeout="4s", active_deadline_seconds=1)
    with DAG(name="main"):
        Task(name="slow", template=slow, arguments={"limit": "3s"})
        Task(name="tight", template=tight)
        Task(name="override", template=override)
