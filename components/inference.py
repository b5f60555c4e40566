"""Batch inference over one shard of documents; each output shard is written exactly once.

Input shards are JSONL, one ``{"id": ..., "text": ...}`` document per line (``id`` defaults to
the line number). For each document the step computes its per-byte perplexity under the model
(``score``), a greedy continuation of its opening (``generate``), or both. The output shard is
JSONL in input order, written atomically; if it already exists the shard is skipped, so a
re-run after a crash neither duplicates nor truncates output.

    python -m components.inference split --input file:///tmp/in.jsonl --shards 4 \\
        --out-prefix file:///tmp/gangway/shards          # prints the shard URIs as JSON
    python -m components.inference run --checkpoint file:///tmp/gangway/ckpt/step-00000300 \\
        --input file:///tmp/gangway/shards/shard-00000.jsonl \\
        --output file:///tmp/gangway/out/shard-00000.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.interfaces import INFER, SPLIT
from gangway import storage
from gangway.contract import tag
from gangway.errors import PermanentError
from gangway.step import emit, main_wrapper
from gangway.step.metrics import StepMetrics
from gangway.step.tracking import CheckpointRef, StepTracker

__all__ = ["MODES", "infer_shard", "read_documents", "split_inputs"]

MODES = ("score", "generate", "both")


def read_documents(uri: str) -> list[dict[str, str]]:
    """Parse a JSONL shard; every problem names the line and what to fix."""
    lines = storage.read_bytes(uri).decode("utf-8", errors="replace").splitlines()
    docs = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise PermanentError(f"{uri}: line {n} is not valid JSON ({e})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise PermanentError(
                f'{uri}: line {n} needs a "text" string field, e.g. {{"text": "..."}}'
            )
        docs.append({"id": str(obj.get("id", n)), "text": obj["text"]})
    if not docs:
        raise PermanentError(f"{uri}: the input shard has no documents; remove it or fill it")
    return docs


def split_inputs(input_uri: str, shards: int, out_prefix: str) -> list[str]:
    """Split a JSONL file into ``shards`` contiguous shards (fewer if there are fewer docs).

    Rewriting a shard with the same documents is harmless, so a re-run is idempotent.
    """
    if shards < 1:
        raise PermanentError(f"--shards {shards}: must be at least 1")
    docs = read_documents(input_uri)
    n = min(shards, len(docs))
    uris = []
    for i in range(n):
        part = docs[i * len(docs) // n : (i + 1) * len(docs) // n]
        uri = storage.join(out_prefix, f"shard-{i:05d}.jsonl")
        storage.write_bytes(uri, "".join(json.dumps(d) + "\n" for d in part).encode())
        uris.append(uri)
    return uris


def infer_shard(
    checkpoint_uri: str,
    input_uri: str,
    output_uri: str,
    *,
    mode: str = "both",
    max_new_tokens: int = 48,
    prompt_bytes: int = 96,
    batch_size: int = 16,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Run inference on one shard; skip it when ``output_uri`` already exists."""
    if mode not in MODES:
        raise PermanentError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
    if storage.exists(output_uri):
        return {"output": output_uri, "skipped": True, "reason": "output already complete"}
    docs = read_documents(input_uri)
    from components._batching import continue_documents, score_documents
    from components._loading import checkpoint_at, inference_mode, load_model
    from components.devices import step_device

    t0 = time.perf_counter()
    device = step_device()
    ckpt = checkpoint_at(checkpoint_uri)
    model = load_model(ckpt, cache_dir or Path(tempfile.gettempdir()) / "gangway-cache", device)
    rows: list[dict[str, Any]] = [
        {"id": d["id"], "bytes": len(d["text"].encode("utf-8"))} for d in docs
    ]
    texts = [d["text"].encode("utf-8") for d in docs]
    print(
        f"inference: {len(docs)} documents of {input_uri} ({mode}) on {device}, model loaded "
        f"in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    progress = StepMetrics()
    progress.items_start(len(docs) * (2 if mode == "both" else 1))
    with inference_mode(device, where=f"inference on {input_uri}", batch_size=batch_size):
        if mode in ("score", "both"):
            for row, (loss, _) in zip(rows, score_documents(model, texts, batch_size), strict=True):
                if loss is not None:
                    row["loss"] = round(loss, 6)
                    row["perplexity"] = round(math.exp(loss), 4)
            progress.items_done(len(docs))
        if mode in ("generate", "both"):
            prompts = [t[:prompt_bytes] or b"\n" for t in texts]
            for row, out in zip(
                rows, continue_documents(model, prompts, max_new_tokens, batch_size), strict=True
            ):
                row["continuation"] = out.decode("utf-8", errors="replace")
            progress.items_done(len(docs))
    storage.write_bytes(output_uri, "".join(json.dumps(r) + "\n" for r in rows).encode())
    scored = [r["loss"] for r in rows if "loss" in r]
    return {
        "output": output_uri,
        "skipped": False,
        "documents": len(rows),
        "checkpoint": checkpoint_uri,
        "checkpoint_step": ckpt.step,
        "mean_perplexity": round(math.exp(sum(scored) / len(scored)), 4) if scored else None,
        "device": device.type,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components.inference",
        description="Batch inference: split inputs into shards, run a checkpoint over one shard.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="process one shard (skipped if its output already exists)")
    INFER.add_arguments(r)
    r.add_argument("--result-out", type=Path, help="write the result JSON to this file")
    s = sub.add_parser("split", help="split a JSONL file into shards; prints their URIs as JSON")
    SPLIT.add_arguments(s)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    (SPLIT if args.command == "split" else INFER).read_inputs(args)
    if args.command == "split":
        with StepTracker() as tracker:
            text = _split(args)
            tracker.log_params({"input": args.input, "shards": args.shards})
            tracker.log_metric("shards", len(json.loads(text)))
        print(text)
        if args.shards_out:
            args.shards_out.parent.mkdir(parents=True, exist_ok=True)
            args.shards_out.write_text(text)
        return 0
    with StepTracker(node=f"infer:{args.output}") as tracker:
        tracker.log_params(
            {
                "checkpoint": args.checkpoint,
                "input": args.input,
                "output": args.output,
                "mode": args.mode,
            }
        )
        result = _infer(args)
        tracker.use_checkpoint(_checkpoint_ref(args.checkpoint))
        tracker.log_outputs([args.output])
        tracker.set_tags({tag("output"): args.output, tag("skipped"): result["skipped"]})
        if result.get("mean_perplexity") is not None:
            tracker.log_metric("mean_perplexity", result["mean_perplexity"])
    emit(result, args.result_out)
    return 0


def _checkpoint_ref(uri: str) -> CheckpointRef:
    from components._loading import checkpoint_at

    ck = checkpoint_at(uri)
    return CheckpointRef(
        uri=ck.uri,
        step=ck.step,
        digest=ck.digest,
        dataset_digest=str(ck.metadata.get("dataset_digest") or ""),
    )


def _split(args: argparse.Namespace) -> str:
    source = args.input
    if source == "demo":
        if not args.demo_root:
            raise PermanentError("--input demo needs --demo-root URI")
        from components.staging import ensure_demo

        source = ensure_demo(args.demo_root)["inputs"]
    uris = split_inputs(source, args.shards, args.out_prefix)
    items: list[Any] = list(uris)
    if args.outputs_prefix:
        items = [
            {"input": u, "output": storage.join(args.outputs_prefix, u.rsplit("/", 1)[-1])}
            for u in uris
        ]
    return json.dumps(items)


def _infer(args: argparse.Namespace) -> dict[str, Any]:
    return infer_shard(
        args.checkpoint,
        args.input,
        args.output,
        mode=args.mode,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        cache_dir=args.cache_dir,
    )


if __name__ == "__main__":
    main_wrapper(main)()
