"""``gangway lint``: check pipelines and manifests against the CRDs before submitting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from gangway.cli._output import console, wrapped
from gangway.cli.options import load_manifests, parse_params
from gangway.errors import PermanentError

if TYPE_CHECKING:
    from gangway.lint import CrdSchemas

__all__ = ["lint_cmd"]


def lint_cmd(
    targets: Annotated[
        list[Path], typer.Argument(help="pipeline files (.py) or manifests (.yaml)")
    ],
    param: Annotated[
        list[str] | None,
        typer.Option(
            "-p",
            "--param",
            help="lint with this workflow parameter value, as it will be substituted: "
            "-p name=value (repeatable)",
        ),
    ] = None,
    crds: Annotated[
        Path | None,
        typer.Option(help="directory of CRD YAML files [env: GANGWAY_CRDS_DIR]"),
    ] = None,
    context: Annotated[
        str | None, typer.Option(help="read the CRDs from this kube context's cluster instead")
    ] = None,
    no_platform: Annotated[
        bool,
        typer.Option(
            "--no-platform",
            help="check only what Argo and Kubernetes would refuse (schemas, Argo's rules); "
            "skip the Gangway platform rules (gangs, GPU selection, Pod Security, "
            "registries, queues)",
        ),
    ] = False,
) -> None:
    """Validate manifests against the installed CRDs, Argo's own rules and the platform's.

    Objects of core Kubernetes kinds (a resource template's Service, ConfigMap, Job ...) are
    checked against the Kubernetes schemas; a kind with neither a CRD nor such a schema is a
    warning. With --no-platform, only the schemas and Argo's rules are checked, for a workflow
    that is valid Argo but not written for the Gangway platform.

    With -p, the values are filled into every manifest the way Argo will fill them, and a value
    that would change a manifest's structure or break a rule is reported with its parameter.
    Every finding names the object, the field path and what to do; the exit code is 1 when
    there is any error (warnings are printed and do not fail).
    """
    values = parse_params(param)
    schemas = _schemas(crds, context)
    findings = []
    count = 0
    for target in targets:
        for obj in load_manifests(target):
            count += 1
            findings += [
                (target, f) for f in _findings(obj, values, schemas, platform=not no_platform)
            ]
    _show(findings)
    errors = sum(f.severity == "error" for _, f in findings)
    skipped = " (platform rules skipped: --no-platform)" if no_platform else ""
    console.print(
        f"{count} object(s) checked against {schemas.source}: {errors} error(s), "
        f"{len(findings) - errors} warning(s){skipped}"
    )
    if errors:
        raise typer.Exit(1)


def _show(findings: list[tuple[Path, Any]]) -> None:
    """Each finding under its file and object: the severity and field path on one line, the
    problem and what to do below it, wrapped at word boundaries; no table, so a pipe or a
    narrow terminal reads it as it is."""
    heading = None
    for target, f in findings:
        if (target, f.obj) != heading:
            heading = (target, f.obj)
            console.print(f"{target}: {f.obj}" if f.obj else str(target), **_PLAIN, style="bold")
        line = Text("  ").append(f.severity, "red" if f.severity == "error" else "yellow")
        console.print(line.append(f": {f.path or '(root)'}"), **_PLAIN)
        console.print(wrapped(f.message, console.width, first="    ", rest="    "), **_PLAIN)


_PLAIN: dict[str, Any] = {"soft_wrap": True, "markup": False, "highlight": False}
"""A line as it is: never wrapped (a path stays whole), never read as markup."""


def _schemas(crds: Path | None, context: str | None) -> CrdSchemas:
    """The CRD schemas to lint against: a cluster's, a directory's, or GANGWAY_CRDS_DIR's."""
    from gangway.lint import CrdSchemas

    if context is not None:
        return CrdSchemas.from_cluster(context)
    if crds is not None:
        return CrdSchemas.from_dir(crds)
    found = CrdSchemas.from_env()
    if found is None:
        raise PermanentError(
            "no CRDs to check against (none ship with Gangway): pass --crds DIR, a "
            "directory of the upstream CRD YAML — Argo Workflows v4.1.2 "
            "manifests/base/crds/full/ and Volcano v1.15.1 config/crd/volcano/bases/ (the "
            "README's 'On a cluster' has the commands that fetch them) — or --context NAME "
            "for a cluster's, or set GANGWAY_CRDS_DIR=DIR"
        )
    return found


def _findings(obj: Any, values: dict[str, str], schemas: Any, *, platform: bool) -> list[Any]:
    """One manifest's findings, filled with the known ``values``; each finding the values
    cause names them."""
    from gangway.argo.references import declared_parameters
    from gangway.lint import lint_manifest
    from gangway.lint.values import check_values, with_values

    declared = declared_parameters(dict(obj))
    known = {k: v for k, v in values.items() if k in declared}  # the rest: findings
    filled = with_values(obj, known) if known else obj
    # Each value alone too: one that breaks a manifest would hide what another does.
    found = check_values(obj, values, schemas, platform=platform)
    blamed = {(v.finding.obj, v.finding.path): v for v in found}
    shown = {(f.obj, f.path): f for f in lint_manifest(filled, schemas, platform=platform)}
    shown.update({k: v.finding for k, v in blamed.items() if k not in shown})
    out = []
    for key, f in shown.items():
        if key in blamed:
            who = ", ".join(f"-p {n}" for n in blamed[key].parameters)
            if f.obj:
                f = replace(f, message=f"{f.message} (caused by {who or 'the -p values'})")
            else:  # about the value itself (its type, its range)
                f = replace(f, message=f"{who}: {f.message}")
        out.append(f)
    return out
