"""A script template's source is staged executable (mode 0755, as Argo's executor writes
it), so ``command: [sh, -c]`` — which runs the staged file by its path — works."""

from hera.workflows import Script, Workflow

with Workflow(name="script-exec-bit", entrypoint="by-path") as w:
    Script(
        name="by-path",
        image="alpine:3.20",
        command=["sh", "-c"],
        source="#!/bin/sh\necho ran by path\n",
    )
