"""A lone container as the entrypoint, echoing a workflow parameter."""

from hera.workflows import Workflow

from tests.argo_features._build import sh

with Workflow(name="hello-container", entrypoint="say", arguments={"who": "argo"}) as w:
    sh("say", "echo hello {{workflow.parameters.who}}")
