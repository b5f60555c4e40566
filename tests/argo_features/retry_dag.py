"""``retryStrategy`` on a DAG template: when its task fails the whole DAG runs again; the second
run succeeds and the caller's next task sees the attempt count."""

from hera.workflows import DAG, RetryStrategy, Task, Volume, Workflow

from tests.argo_features._build import py, sh

BUMP = (
    "import pathlib; p = pathlib.Path('/mnt/gw-retry-dag/count');"
    " n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); print(n);"
    " raise SystemExit(0 if n >= 2 else 1)"
)

with Workflow(name="retry-dag", entrypoint="main") as w:
    counter = Volume(name="counter", size="1Mi", mount_path="/mnt/gw-retry-dag")
    bump = py("bump", BUMP, volumes=[counter])
    report = sh("report", "echo runs=$(cat /mnt/gw-retry-dag/count)", volumes=[counter])
    with DAG(name="attempt", retry_strategy=RetryStrategy(limit=2)):
        Task(name="bump", template=bump)
    with DAG(name="main"):
        Task(name="attempt", template="attempt")
        Task(name="report", template=report, depends="attempt")
