"""A workflow ``onExit`` handler (a container) after a failed DAG: it reads
``{{workflow.status}}`` and ``{{workflow.failures}}`` (a JSON list; Argo hands it over quoted,
so it is decoded until it is a list) and prints the failed leaf with its phase and message."""

from hera.workflows import DAG, Container, Task, Workflow

from tests.argo_features._build import IMAGE, sh

SUMMARY = """\
import json, sys
found = json.loads(sys.argv[2])
found = json.loads(found) if isinstance(found, str) else found
hits = [f for f in found if f.get('templateName') == 'explode']
print(sys.argv[1], ' '.join(f"{f['displayName']}:{f['phase']}:{f['message']}" for f in hits))
"""

with Workflow(name="exit-handler-failed", entrypoint="main", on_exit="summary") as w:
    explode = sh("explode", "exit 3")
    Container(
        name="summary",
        image=IMAGE,
        command=["python", "-c", SUMMARY],
        args=["{{workflow.status}}", "{{workflow.failures}}"],
    )
    with DAG(name="main"):
        Task(name="boom", template=explode)
