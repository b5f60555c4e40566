"""``gangway doctor --cluster NAME``: does the cluster side match what ``gangway manifests
render`` makes for it, and what to run to fix each difference (parse → call → print; the
comparison is :func:`gangway.lint.drift.compare`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from gangway.cli._output import console, wrapped
from gangway.cli.options import Output, OutputOpt
from gangway.errors import FieldError, chosen_cluster
from gangway.lint.drift import Drift

__all__ = ["doctor_cmd", "render_drift"]

EXIT_DIFFERS = 1
"""The exit code when the cluster differs from its rendering (as `manifests render --diff`)."""


def doctor_cmd(
    cluster: Annotated[str | None, typer.Option(help="the cluster, as the config names it")] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="the platform config [env: GANGWAY_CONFIG; default: the example]"),
    ] = None,
    manifests: Annotated[
        str,
        typer.Option(help="where the rendering is written: the fixes apply files under it"),
    ] = "manifests",
    output: OutputOpt = Output.TABLE,
) -> None:
    """Compare a cluster with what `gangway manifests render` makes for it.

    Checks the CRDs (Argo Workflows v4.1.2, Volcano v1.15.1 and, where the overlay has a
    PodMonitor, prometheus-operator v0.93.0: present, serving the rendered API versions, at
    those versions), then every rendered object by the file it is in: queues (missing, extra,
    each guarantee/deserved/capability/weight/reclaimable), priority classes, the Volcano
    scheduler's configuration, admission policies and bindings, Argo's controller ConfigMap
    (its MLflow and dashboard links), the monitoring objects, team namespaces and
    Deployments. Each difference names the object, the field and the command that fixes it
    (render first: `gangway manifests render`). Exit 0 when the cluster matches (warnings
    allowed), 1 when it differs; a cluster that cannot be read is one error line (exit 75
    when the API server cannot be reached).
    """
    from gangway.cluster.doctor import doctor
    from gangway.config import load_config

    cfg = load_config(config)
    name = chosen_cluster(cluster, cfg.clusters, "the config")
    drift = doctor(cfg, name, manifests=manifests)
    if output == Output.JSON:
        typer.echo(json.dumps(drift.to_json(), indent=2))
    else:
        console.print(render_drift(drift, console.width), highlight=False, crop=False)
    if not drift.matches:
        raise typer.Exit(EXIT_DIFFERS)


def render_drift(drift: Drift, width: int = 80) -> Group:
    """A table of the checks, then each difference and the command that fixes it (findings
    with one fix share it), and the command that applies everything, wrapped to ``width``
    between words (a command's URL stays whole, to copy)."""
    t = Table(header_style="bold")
    t.add_column("check", overflow="fold")
    t.add_column("compared", justify="right")
    t.add_column("result", overflow="fold")
    for c in drift.checks:
        warnings = len(c.findings) - c.differences
        said = [f"{c.differences} difference(s)" if c.differences else "OK"]
        said += [f"{warnings} warning(s)"] if warnings else []
        t.add_row(c.name, str(c.compared), Text(", ".join(said), style=_style(c.differences)))
    head = f"{drift.cluster} (kube context {drift.context}) against its rendering"
    parts: list[Text | Table] = [Text(wrapped(head, width, first="", rest="  "), style="bold"), t]
    by_fix: dict[str, list[FieldError]] = {}
    for c in drift.checks:
        for f in c.findings:
            by_fix.setdefault(f.hint, []).append(f)
    for fix, findings in by_fix.items():
        for f in findings:
            mark = "✗" if f.severity == "error" else "!"
            where = f"{f.obj} {f.path}".strip()
            line = wrapped(f"{where}: {f.message}", width, first=f"{mark} ", rest="    ")
            parts.append(
                Text(line, style=_style(f.severity == "error"), no_wrap=True, overflow="ignore")
            )
        parts.append(
            Text(wrapped(fix, width, first="  fix: ", rest="    "), no_wrap=True, overflow="ignore")
        )
    if drift.matches:
        parts.append(Text("The cluster matches its rendering.", style="green"))
    else:
        advice = (
            "The fixes apply the rendered files: render them first (gangway manifests render). "
            f"Or apply everything at once: {drift.apply_all}"
        )
        parts.append(
            Text(wrapped(advice, width, first="", rest=""), no_wrap=True, overflow="ignore")
        )
    return Group(*parts)


def _style(bad: int | bool) -> str:
    return "red" if bad else "green"
