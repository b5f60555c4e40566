"""``retryStrategy.expression`` without ``retryPolicy``: Argo's policy is then ``Always``, so
an attempt that ends ``Error`` (killed by a signal) is retried while the expression holds;
``lastRetry.duration`` is the seconds the last attempt ran. The step counts its attempts in
a file on a claimed volume and is killed on the first."""

from hera.workflows import DAG, RetryStrategy, Task, Volume, Workflow

from tests.argo_features._build import sh

SCRIPT = (
    "f=/mnt/gw-retry-expr/n; n=$(cat $f 2>/dev/null || echo 0); n=$((n+1)); echo $n > $f;"
    " if [ $n -lt 2 ]; then kill -9 $$; fi; echo attempt=$n"
)

with Workflow(name="retry-expression-policy", entrypoint="main") as w:
    counter = Volume(name="counter", size="1Mi", mount_path="/mnt/gw-retry-expr")
    flaky = sh(
        "flaky",
        SCRIPT,
        volumes=[counter],
        retry_strategy=RetryStrategy(
            limit=3,
            expression="lastRetry.status == 'Error' && asFloat(lastRetry.duration) < 60",
        ),
    )
    with DAG(name="main"):
        Task(name="flaky", template=flaky)
