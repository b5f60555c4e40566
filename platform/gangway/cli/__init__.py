"""The ``gangway`` command line: verb + noun, parse → validate → run, output apart from logic.

This module imports nothing heavy at its top: the console script enters :func:`main` at once,
so a Ctrl-C while the commands' modules load (over a second) is caught there too — one
``interrupted`` line and exit 130, never a traceback. ``app`` is built at its first use.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]

_built: list[Any] = []


def _app() -> typer.Typer:
    """The Typer app with every command, built once."""
    if _built:
        return _built[0]  # type: ignore[no-any-return]
    import typer

    from gangway import __version__
    from gangway.cli import (
        cluster_cmds,
        doctor,
        exporter,
        lineage,
        lint,
        ls,
        manifests,
        pipelines,
        resume,
        scheduling,
        simulate,
        usage,
    )
    from gangway.cli._help import command_group

    app = command_group(
        name="gangway",
        help=(
            "Gangway: ML pipelines on Argo Workflows, gang-scheduled PyTorch training on Volcano, "
            "and the same pipeline on this machine.\n\n"
            "Start with `gangway run pipelines/train_eval_infer.py`: it stages a corpus built from "
            "Python's own sources, trains a small GPT as a gang of 2 torchrun pods, evaluates "
            "every checkpoint and runs batch inference — the compiled Argo workflow, executed here."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.command("compile")(pipelines.compile_cmd)
    app.command("run")(pipelines.run_cmd)
    app.command("retry")(pipelines.retry_cmd)
    app.command("resume")(resume.resume_cmd)
    app.command("lint")(lint.lint_cmd)
    app.command("submit")(cluster_cmds.submit_cmd)
    app.command("deploy")(cluster_cmds.deploy_cmd)
    app.command("status")(cluster_cmds.status_cmd)
    app.command("logs")(cluster_cmds.logs_cmd)
    app.command("links")(cluster_cmds.links_cmd)
    app.command("ls")(ls.ls)
    app.command("lineage")(lineage.lineage_cmd)
    app.command("queues")(scheduling.queues_cmd)
    app.command("explain")(scheduling.explain_cmd)
    app.command("why")(scheduling.why_cmd)
    app.command("simulate")(simulate.simulate_cmd)
    app.command("usage")(usage.usage_cmd)
    app.command("doctor")(doctor.doctor_cmd)
    app.command("exporter")(exporter.exporter_cmd)
    app.add_typer(manifests.app, name="manifests")
    app.add_typer(scheduling.app, name="snapshot")

    @app.command("version")
    def version() -> None:
        """Print the Gangway version."""
        typer.echo(__version__)

    _built.append(app)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(args: list[str] | None = None) -> None:
    """Console-script entry point (``args``: the command line, default ``sys.argv``): user
    errors print one line and exit with their code; Ctrl-C — also while the modules load —
    prints ``interrupted`` and exits 130."""
    try:
        _main(args)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        sys.exit(130)


def _main(args: list[str] | None) -> None:
    from gangway.errors import GangwayError

    app = _app()
    try:
        app(args)
    except GangwayError as e:
        import typer

        typer.secho(f"error: {e}", fg="red", err=True)
        sys.exit(e.exit_code)
