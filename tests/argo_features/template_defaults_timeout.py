"""``spec.templateDefaults.timeout`` reaches every leaf (a 30 s sleep is stopped after the
2 s a ``3s`` timeout leaves its pod); the DAG that inherits it is not timed."""

from hera.workflows import DAG, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(
    name="template-defaults-timeout",
    entrypoint="main",
    template_defaults=m.Template(timeout="3s"),
) as w:
    slow = sh("slow", "sleep 30")
    quick = sh("quick", "echo quick")
    with DAG(name="main"):
        Task(name="slow", template=slow)
        Task(name="quick", template=quick)
