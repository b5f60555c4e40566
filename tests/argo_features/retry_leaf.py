"""``retryStrategy: {limit: 2}`` on a leaf that fails twice and then succeeds, counting its
attempts in a file on a claimed volume (which outlives each attempt's pod)."""

from hera.workflows import DAG, RetryStrategy, Task, Volume, Workflow

from tests.argo_features._build import py

BUMP = (
    "import pathlib; p = pathlib.Path('/mnt/gw-retry/count');"
    " n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); print(n);"
    " raise SystemExit(0 if n >= 3 else 1)"
)

with Workflow(name="retry-leaf", entrypoint="main") as w:
    counter = Volume(name="counter", size="1Mi", mount_path="/mnt/gw-retry")
    flaky = py("flaky", BUMP, volumes=[counter], retry_strategy=RetryStrategy(limit=2))
    with DAG(name="main"):
        Task(name="flaky", template=flaky)
