"""An environment variable from a Secret (``valueFrom.secretKeyRef``, secret ``gw-creds``, key
``api-token``)."""

from hera.workflows import SecretEnv, Workflow

from tests.argo_features._build import sh

with Workflow(name="secret-env", entrypoint="show") as w:
    sh(
        "show",
        'echo "token=$API_TOKEN"',
        env=[SecretEnv(name="API_TOKEN", secret_name="gw-creds", secret_key="api-token")],
    )
