"""The network look-ups ``gangway submit`` and ``deploy`` make beyond the cluster: the image's
digest in its registry (:mod:`gangway.cluster.images`) and the pipeline's MLflow experiment for the
Argo UI's link (:mod:`gangway.lineage.links`). A dry run makes them only when asked
(``--pin-image``, ``--check-links``) and says what it left out."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gangway.cli._output import err_console

__all__ = ["CheckLinksOpt", "PinOpt", "link_mlflow", "mlflow_url", "pinned_image"]

PinOpt = Annotated[
    bool | None,
    typer.Option(
        "--pin-image/--no-pin-image",
        help="pin the image by digest (the registry is asked; a submit does by default, a dry "
        "run only when given --pin-image) — or send it as given (by tag): the lineage then "
        "records a tag that may move",
        show_default=False,
    ),
]
CheckLinksOpt = Annotated[
    bool,
    typer.Option(
        "--check-links",
        help="dry run: ask MLflow for the pipeline's experiment, for the Argo UI link (a dry "
        "run makes no network call unless asked)",
    ),
]


def mlflow_url(cluster: str | None) -> str | None:
    """Where users reach MLflow, for a dry run (which must work with no cluster configured)."""
    import os

    if cluster:
        from gangway.cluster.settings import resolve_cluster

        return resolve_cluster(cluster).mlflow_url
    return os.environ.get("GANGWAY_MLFLOW_URL") or None


def link_mlflow(plan: Any, url: str | None, *, create: bool, ask: bool = True) -> Any:
    """Annotate the plan with each pipeline's MLflow experiment id for the Argo UI link
    (``ask=False``: a dry run that was not asked to call MLflow says it left the link out)."""
    from gangway.cluster.submission import pipeline_of, with_experiments
    from gangway.lineage.links import experiment_id

    if url and not ask:
        err_console.print(
            f"dry run: the MLflow link is left out, {url} not asked for the experiment "
            "(--check-links asks it)",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        return plan
    if not url:
        err_console.print(
            "[yellow]no MLflow link in the Argo UI: set GANGWAY_MLFLOW_URL (or mlflow_url: "
            "in the cluster config) to the MLflow server users open[/]"
        )
        return plan
    ids: dict[str, str] = {}
    for name in sorted({pipeline_of(o) for o in plan.upserts}):
        try:
            found = experiment_id(url, name, create=create)
        except Exception as e:
            err_console.print(f"[yellow]no MLflow link: {url} did not answer: {e}[/]")
            return plan
        if found is None:
            err_console.print(f"note: experiment {name!r} does not exist yet; submit creates it")
        else:
            ids[name] = found
    return with_experiments(plan, ids)


def pinned_image(
    obj: dict[str, Any], params: dict[str, str], *, pin: bool, dry_run: bool
) -> dict[str, str]:
    """The ``image`` parameter pinned by digest (:mod:`gangway.cluster.images`), for the workflow
    and its lineage. A dry run whose registry cannot be reached shows the tag, with a warning."""
    from rich.markup import escape

    from gangway.cluster.images import pin_image
    from gangway.errors import TransientError
    from gangway.workflows.provenance import pinned_image_param

    if not pin:
        if dry_run:
            err_console.print(
                "dry run: the image goes by its tag, the registry not asked for its digest "
                "(--pin-image asks it; a submit pins it)",
                highlight=False,
                soft_wrap=True,
            )
        else:
            err_console.print(
                "[yellow]--no-pin-image: the image goes by its tag, which may move; the lineage "
                "records the tag, not the digest that ran[/]"
            )
        return {}
    try:
        return pinned_image_param(obj, params, pin=pin_image)
    except TransientError as e:
        if not dry_run:
            raise TransientError(f"{e}; nothing was sent (--no-pin-image sends the tag)") from None
        err_console.print(
            f"[yellow]image not pinned in this dry run: {escape(str(e))}; a submit would stop "
            "here[/]",
            soft_wrap=True,
        )
        return {}
