"""Nightly evals (``pipelines/nightly_eval.py``): discover what is due, score it, report.

    python -m components.nightly discover --model M --suites JSON --pending-out P
    python -m components.nightly score --candidate M/3 --checkpoint URI --suite S --suites JSON \\
        --storage-root URI --metrics-out P
    python -m components.nightly report --model M --suites JSON --summary-out P \\
        --regressions-out P
    python -m components.nightly gate --regressions JSON

Every command reads and writes MLflow (``MLFLOW_TRACKING_URI``) through
:mod:`gangway.evals.store`; what is due and what regressed are decided by the pure functions
of :mod:`gangway.evals`. ``gate`` fails (exit 1) naming every version that regressed, so the
workflow ends Failed after the summary and the tags are written.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from components.interfaces import (
    DISCOVER,
    GATE,
    REPORT,
    SCORE,
    DiscoverOutputs,
    EvalPair,
    ReportOutputs,
    ScoreOutputs,
)
from gangway import storage
from gangway.contract import ENV_PIPELINE, ENV_TRACKING_URI
from gangway.errors import PermanentError
from gangway.evals.suites import EvalSuite, parse_suites
from gangway.step import main_wrapper
from gangway.step.interface import CheckpointUri, StepSpec

__all__ = ["main"]


def _client() -> Any:
    uri = os.environ.get(ENV_TRACKING_URI, "")
    if not uri:
        raise PermanentError(
            "nightly evals find what is due in MLflow: give the pipeline an mlflow-tracking-uri"
        )
    from gangway.lineage import store

    return store.client(uri, write=True)


def _experiment(client: Any) -> str:
    from gangway.lineage.ensure import ensure_experiment

    return ensure_experiment(client, os.environ.get(ENV_PIPELINE) or "nightly-eval")


def _workflow() -> Any:
    from gangway.lineage.records import workflow_from_env

    return workflow_from_env(os.environ)


def discover(args: argparse.Namespace) -> None:
    from gangway.evals.discover import pending
    from gangway.evals.store import candidates, evaluations

    suites = parse_suites(args.suites)
    client = _client()
    found = candidates(client, args.model)
    done = {e.key for e in evaluations(client, _experiment(client))}
    due = pending(found, suites, done, limit=args.limit)
    if due:
        print(f"{len(due)} evaluation(s) due on {len(suites)} suite(s):", flush=True)
        for p in due:
            print(f"  {p.suite}: {p.candidate} ({p.checkpoint})", flush=True)
    else:
        print(
            f"nothing new to score: {len(found)} version(s) of {args.model!r} are scored on "
            f"every suite ({', '.join(s.name for s in suites)})",
            flush=True,
        )
    pairs = [
        EvalPair(candidate=p.candidate, checkpoint=CheckpointUri(p.checkpoint), suite=p.suite)
        for p in due
    ]
    DISCOVER.write_outputs(args, DiscoverOutputs(pending=pairs))


def _suite(suites: list[EvalSuite], name: str) -> EvalSuite:
    for s in suites:
        if s.name == name:
            return s
    raise PermanentError(f"--suite {name!r}: no such suite ({', '.join(s.name for s in suites)})")


def score(args: argparse.Namespace) -> None:
    from components.scorers import run_scorer
    from gangway.evals.discover import Pair
    from gangway.evals.store import ensure_eval, finish_eval

    suite = _suite(parse_suites(args.suites), args.suite)
    uri = suite.dataset.uri
    dataset = uri if "://" in uri else storage.join(args.storage_root, uri)
    client = _client()
    pair = Pair(args.candidate, args.checkpoint, suite.name)
    wf = _workflow()
    run = ensure_eval(client, _experiment(client), wf, suite, pair, dataset)
    if run.finished:  # scored already (the same night run twice): nothing to add
        print(f"{suite.name}: {pair.candidate} was scored already", flush=True)
        metrics = run.metrics
    else:
        cache = args.cache_dir or Path(tempfile.gettempdir()) / "gangway-cache"
        try:
            metrics = run_scorer(suite, dataset, args.checkpoint, cache)
        except BaseException:  # shown FAILED in MLflow; still due, so the next night retries
            client.set_terminated(run.run_id, status="FAILED")
            raise
        finish_eval(client, run.run_id, wf, metrics, {**suite.settings, "scorer": suite.scorer})
        shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        print(f"{suite.name}: {pair.candidate}: {shown}", flush=True)
    SCORE.write_outputs(args, ScoreOutputs(metrics=json.dumps(metrics, sort_keys=True)))


def report(args: argparse.Namespace) -> None:
    from gangway.evals.compare import compare
    from gangway.evals.report import markdown, regressions
    from gangway.evals.store import baseline_of, evaluations, log_report, tag_regressions

    suites = parse_suites(args.suites)
    client = _client()
    exp_id = _experiment(client)
    wf = _workflow()
    digests = {s.name: s.digest for s in suites}
    current = [e for e in evaluations(client, exp_id) if digests.get(e.suite) == e.digest]
    tonight: dict[str, list[str]] = {}
    for e in current:
        if e.workflow_uid == wf.uid:
            tonight.setdefault(e.suite, []).append(e.candidate)
    for refs in tonight.values():
        refs.sort(key=lambda r: int(r.rpartition("/")[2]))
    baselines = {s.name: baseline_of(client, args.model, s.baseline) for s in suites}
    scores = {(e.suite, e.candidate): e.metrics for e in current}
    rows = compare(suites, tonight, baselines, scores)
    due = sum(len(v) for v in tonight.values())
    title = f"Nightly evals of {args.model}: {wf.name or 'this run'}"
    text = markdown(title, rows, [s.name for s in suites], due)
    bad = regressions(rows)
    tag_regressions(client, bad)
    parent = log_report(client, exp_id, wf, text)
    print(text, flush=True)
    print(f"summary logged to MLflow run {parent} (nightly-eval/summary.md)", flush=True)
    REPORT.write_outputs(args, ReportOutputs(summary=text, regressions=json.dumps(bad)))


def gate(args: argparse.Namespace) -> None:
    try:
        bad: dict[str, list[str]] = json.loads(args.regressions or "{}")
    except ValueError:
        raise PermanentError(f"--regressions: not JSON: {args.regressions[:200]}") from None
    if bad:
        named = "; ".join(
            f"{ref} on {', '.join(suites)} (tagged regression={','.join(suites)})"
            for ref, suites in bad.items()
        )
        raise PermanentError(f"regression: {named}; the report step's summary has the numbers")
    print("no regressions", flush=True)


_COMMANDS: dict[str, tuple[StepSpec, Callable[[argparse.Namespace], None]]] = {
    "discover": (DISCOVER, discover),
    "score": (SCORE, score),
    "report": (REPORT, report),
    "gate": (GATE, gate),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m components.nightly", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (spec, _) in _COMMANDS.items():
        spec.add_arguments(sub.add_parser(name, help=f"the {name} step"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    spec, run = _COMMANDS[args.command]
    spec.read_inputs(args)  # the declared bounds
    run(args)
    return 0


if __name__ == "__main__":
    main_wrapper(main)()
