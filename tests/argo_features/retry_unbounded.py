"""``retryStrategy: {}`` (no ``limit``): Argo retries it without end under its default policy,
``OnFailure``. A step that always fails is retried (a local run stops after its cap of 10
retries, and says so); a step killed by a signal ends ``Error``, which ``OnFailure`` does not
retry."""

from hera.workflows import DAG, RetryStrategy, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="retry-unbounded", entrypoint="main") as w:
    always = sh("always-fails", "echo try; exit 3", retry_strategy=RetryStrategy())
    killed = sh("killed", "kill -9 $$", retry_strategy=RetryStrategy())
    with DAG(name="main"):
        Task(name="always", template=always)
        Task(name="killed", template=killed)
