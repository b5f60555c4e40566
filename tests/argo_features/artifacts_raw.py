"""A ``raw`` input artifact: its inline data is the file the step reads."""

from hera.workflows import RawArtifact, Workflow

from tests.argo_features._build import sh

with Workflow(name="artifacts-raw", entrypoint="show") as w:
    sh(
        "show",
        "cat /tmp/gw-raw/settings.ini",
        inputs=[
            RawArtifact(name="settings", path="/tmp/gw-raw/settings.ini", data="[gw]\nmode=raw\n")
        ],
    )
