"""Checkpoint evaluation: score checkpoints on the validation split and pick the best.

    python -m components.evaluation --data file:///tmp/gangway/corpus \\
        --checkpoints file:///tmp/gangway/ckpt --metrics-out metrics.json --best-out best.txt

Each checkpoint is scored by mean next-byte cross-entropy (nats) and perplexity over the same
validation windows; the lowest loss wins (ties go to the later step). A checkpoint that cannot
be used (a file missing or not matching its manifest's sha256) is skipped with a warning naming
it and listed under ``unusable`` in the metrics; the step fails only when no checkpoint is
usable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.interfaces import EVALUATE, EvaluateOutputs
from gangway import storage
from gangway.contract import ENV_PIPELINE, tag
from gangway.errors import NotFoundError, PermanentError
from gangway.step import emit, main_wrapper
from gangway.step.interface import CheckpointUri
from gangway.step.metrics import StepMetrics
from gangway.step.tracking import CheckpointRef, StepTracker

__all__ = ["evaluate"]


def evaluate(
    data_uri: str,
    checkpoint_uris: Sequence[str],
    *,
    max_tokens: int = 65_536,
    batch_size: int = 16,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Score each checkpoint; returns the metrics document (see module docstring)."""
    import torch

    from components._loading import checkpoint_at, inference_mode, load_model
    from components.corpus import open_corpus, val_batches
    from components.devices import step_device

    if not checkpoint_uris:
        raise NotFoundError("no checkpoints to evaluate; did training run and commit any?")
    cache = cache_dir or Path(tempfile.gettempdir()) / "gangway-cache"
    device = step_device()
    corpus = open_corpus(data_uri, cache / "data")
    results: list[dict[str, Any]] = []
    unusable: list[dict[str, str]] = []
    progress = StepMetrics()
    progress.items_start(len(checkpoint_uris))
    for uri in checkpoint_uris:
        t0 = time.perf_counter()
        try:
            ckpt = checkpoint_at(uri)
            model = load_model(ckpt, cache, device)
        except PermanentError as e:  # corrupt or incomplete: score the others, say which
            why = str(e) if uri in str(e) else f"{uri}: {e}"
            print(f"warning: skipping a checkpoint: {why}", file=sys.stderr, flush=True)
            unusable.append({"uri": uri, "error": why})
            progress.items_done()
            continue
        total, count = torch.zeros((), device=device, dtype=torch.float64), 0
        with inference_mode(device, where=f"evaluating {uri}", batch_size=batch_size):
            for xb, yb in val_batches(
                corpus.val, block=model.cfg.block_size, batch_size=batch_size, max_tokens=max_tokens
            ):
                x = torch.from_numpy(xb).to(device)
                y = torch.from_numpy(yb).to(device)
                total += model.loss(x, y).double() * y.numel()  # on the device: no sync
                count += y.numel()
        loss = float(total) / count
        results.append(
            {
                "uri": uri,
                "step": ckpt.step,
                "digest": ckpt.digest,
                "loss": round(loss, 6),
                "perplexity": round(math.exp(loss), 4),
                "tokens": count,
                "trained_on": ckpt.metadata.get("dataset_digest"),
                "seconds": round(time.perf_counter() - t0, 3),
                "device": device.type,
            }
        )
        del model  # one checkpoint's weights at a time on the device
        progress.items_done()
        print(f"evaluated step {ckpt.step}: loss {loss:.4f} ppl {math.exp(loss):.2f}", flush=True)
    if not results:
        raise PermanentError(
            f"none of the {len(unusable)} checkpoint(s) could be evaluated: "
            + "; ".join(u["error"] for u in unusable)
        )
    best = min(results, key=lambda r: (r["loss"], -r["step"]))
    return {
        "dataset_digest": corpus.digest,
        "checkpoints": results,
        "best": best,
        "unusable": unusable,
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components.evaluation",
        description="Score checkpoints on the validation split and pick the best one.",
    )
    EVALUATE.add_arguments(p)
    p.add_argument("--checkpoint", action="append", help="one checkpoint URI (repeatable)")
    p.add_argument(
        "--register-as",
        default=os.environ.get(ENV_PIPELINE, ""),
        metavar="MODEL",
        help="register the best checkpoint as a version of this MLflow registered model "
        "(default: the pipeline's name when run in a pipeline; '' to skip)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    EVALUATE.read_inputs(args)
    if bool(args.checkpoints) == bool(args.checkpoint):
        raise PermanentError("give --checkpoints ROOT or --checkpoint URI (repeatable), not both")
    if args.checkpoints:
        from components import checkpoints

        uris = [c.uri for c in checkpoints.complete(args.checkpoints)]
        if not uris:
            raise NotFoundError(f"{args.checkpoints}: no complete checkpoints under this root")
    else:
        uris = args.checkpoint
    with StepTracker() as tracker:
        metrics = evaluate(
            args.corpus,
            uris,
            max_tokens=args.max_tokens,
            batch_size=args.batch_size,
            cache_dir=args.cache_dir,
        )
        tracker.log_params({"data": args.corpus, "checkpoints": len(uris)})
        tracker.log_dataset(name="corpus", digest=metrics["dataset_digest"], source=args.corpus)
        for r in metrics["checkpoints"]:
            ref = _ref(r, metrics["dataset_digest"])
            tracker.use_checkpoint(ref)
            tracker.log_metric("val_loss", r["loss"], r["step"], checkpoint=ref.uri)
            tracker.log_metric("val_perplexity", r["perplexity"], r["step"], checkpoint=ref.uri)
        best = metrics["best"]
        if args.register_as:
            tracker.register_model(args.register_as, _ref(best, metrics["dataset_digest"]))
        tracker.set_tags(
            {
                tag("best_checkpoint"): best["uri"],
                tag("best_step"): best["step"],
                tag("dataset_digest"): metrics["dataset_digest"],
            }
        )
        if metrics["unusable"]:
            unusable = [u["uri"] for u in metrics["unusable"]]
            tracker.set_tags({tag("unusable_checkpoints"): json.dumps(unusable)})
    if args.metrics_out:
        storage.write_json(args.metrics_out, metrics)
    outputs = EvaluateOutputs(
        best=CheckpointUri(metrics["best"]["uri"]), scores=json.dumps(metrics)
    )
    EVALUATE.write_outputs(args, outputs)
    summary = {"best": metrics["best"], "evaluated": len(metrics["checkpoints"])}
    if metrics["unusable"]:
        summary["unusable"] = [u["uri"] for u in metrics["unusable"]]
    emit(summary, None)
    return 0


def _ref(result: dict[str, Any], dataset_digest: str) -> CheckpointRef:
    return CheckpointRef(
        uri=result["uri"],
        step=result["step"],
        digest=result.get("digest") or "",
        dataset_digest=result.get("trained_on") or dataset_digest,
        metrics={"val_loss": result["loss"], "val_perplexity": result["perplexity"]},
    )


if __name__ == "__main__":
    main_wrapper(main)()
