"""The workflow's exit handler: close its MLflow parent run and send every spooled record.

    python -m gangway.lineage.close {{workflow.status}}

Steps in a pipeline only spool their lineage (:mod:`gangway.step.tracking`); this runs once the
workflow has ended, so its lineage is complete in MLflow when it ends. It never fails the
workflow: with MLflow unreachable everything stays spooled, and the namespace's
``gangway lineage sync --follow`` (or a hand-run ``gangway lineage sync``) sends it later.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from gangway.contract import ENV_LINEAGE_SPOOL, ENV_LOCAL_RUN, ENV_TRACKING_URI
from gangway.lineage import default_spool
from gangway.lineage.records import Status, workflow_from_env

__all__ = ["EXIT_STATUS", "main"]

EXIT_STATUS: Mapping[str, Status] = {
    "Succeeded": "FINISHED",
    "Failed": "FAILED",
    "Error": "FAILED",
}
"""Argo's ``workflow.status`` at exit → the parent run's MLflow status."""


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    from gangway.step.tracking import record_workflow

    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if len(args) != 1 or args[0] not in EXIT_STATUS:
        print(
            f"usage: python -m gangway.lineage.close {{{'|'.join(EXIT_STATUS)}}} "
            f"(got {' '.join(args) or 'nothing'})",
            file=sys.stderr,
        )
        return 0  # a wrong call is reported, never a failed workflow
    uri = env.get(ENV_TRACKING_URI, "")
    if env.get(ENV_LOCAL_RUN):
        print("lineage: `gangway run` sends it as the steps end and records the workflow's end")
        return 0
    if not uri:
        print("lineage: tracking is off (no MLFLOW_TRACKING_URI); nothing to send")
        return 0
    wf = workflow_from_env(env)
    spool = env.get(ENV_LINEAGE_SPOOL) or default_spool(wf.uid)
    state = record_workflow(uri, wf, EXIT_STATUS[args[0]], spool, phase=args[0])
    if state.error or state.pending:
        print(
            f"warning: {max(state.pending, 1)} lineage record(s) not in MLflow yet "
            f"({state.error or 'pending'}); they stay spooled at {spool} for "
            "`gangway lineage sync`",
            file=sys.stderr,
        )
    else:
        print(f"lineage complete: workflow run {state.parent} {state.url or ''}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
