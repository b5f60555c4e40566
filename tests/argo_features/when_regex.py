"""``when`` with govaluate's regex operators ``=~`` / ``!~`` (Go RE2, matched anywhere in the
text): a version string and loop items. In a govaluate string a backslash escapes the next
character, so ``\\\\.`` in the condition text is the regexp ``\\.``."""

from hera.workflows import DAG, Parameter, Task, Workflow

from tests.argo_features._build import sh

VERSION = "{{tasks.version.outputs.result}}"

with Workflow(name="when-regex", entrypoint="main") as w:
    version = sh("version", "echo v1.24.3")
    say = sh("say", "echo {{inputs.parameters.msg}}", inputs=[Parameter(name="msg")])
    with DAG(name="main"):
        Task(name="version", template=version)
        Task(
            name="release",
            template=say,
            depends="version",
            when=f"'{VERSION}' =~ '^v[0-9]+\\\\.[0-9]+\\\\.[0-9]+$'",
            arguments={"msg": "release"},
        )
        Task(
            name="not-rc",
            template=say,
            depends="version",
            when=f"'{VERSION}' !~ '-rc[0-9]*$'",
            arguments={"msg": "final"},
        )
        Task(
            name="nightly",
            template=say,
            depends="version",
            when=f"'{VERSION}' =~ '(?i)NIGHTLY' || '{VERSION}' =~ '^v2'",
            arguments={"msg": "nightly"},
        )
        Task(
            name="zone",
            template=say,
            when="'{{item}}' =~ '^eu-' && '{{item}}' !~ '[0-9]$'",
            arguments={"msg": "{{item}}"},
            with_items=["eu-west", "us-east", "eu-north1"],
        )
