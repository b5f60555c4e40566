"""Variables Argo gives a node and each attempt: ``{{retries}}`` (the attempt's number, from
0) and ``{{lastRetry.*}}`` of the attempt before, in a template with a retryStrategy;
``{{node.name}}`` (the full node name, the workflow's first); ``{{pod.name}}`` (the attempt's
pod); ``{{tasks.name}}`` / ``{{steps.name}}`` (the calling task's or step's own name)."""

from hera.workflows import DAG, RetryStrategy, Step, Steps, Task, Workflow

from tests.argo_features._build import sh

SHOW = (
    "echo {{retries}} {{lastRetry.exitCode}} {{lastRetry.status}} {{node.name}} {{pod.name}}"
    " {{tasks.name}}; [ {{retries}} -ge 2 ] || exit 4"
)

with Workflow(name="vars-retries-node-name", entrypoint="main") as w:
    flaky = sh("flaky", SHOW, retry_strategy=RetryStrategy(limit=3))
    plain = sh("plain", "echo {{node.name}} {{pod.name}} {{steps.name}}")
    with Steps(name="inner"):
        Step(name="echo", template=plain)
    with DAG(name="main"):
        Task(name="try", template=flaky)
        Task(name="nested", template="inner")
