"""Data staging: copy a published dataset, verify it, build the byte-level corpus, name it.

A *dataset* is a directory published with :func:`gangway.storage.publish_dir`: text files plus
a ``_manifest.json`` listing every file's sha256. Staging

1. copies the files to ``WORKDIR/raw`` and verifies each against the manifest (files already
   there and verified are not copied again, so a killed run resumes);
2. turns them into a byte-level corpus: ``train.bin`` and ``val.bin`` (uint8 tokens, read with
   ``numpy.memmap``; documents joined by a 0 byte; each document goes to validation when a hash
   of its path falls under ``val_fraction``) plus ``meta.json``;
3. emits the **dataset digest**, a sha256 over the source manifest and the tokenizer settings,
   which names this data version everywhere downstream;
4. optionally publishes the corpus to ``--publish URI`` for training pods on other machines.

``demo`` builds a real dataset with no download from the Python standard library's own source.

    python -m components.staging demo --out file:///tmp/gangway/datasets/stdlib
    python -m components.staging stage --source file:///tmp/gangway/datasets/stdlib \\
        --workdir /tmp/gangway/work --publish file:///tmp/gangway/corpus
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from components.interfaces import STAGE, StageOutputs
from gangway import storage
from gangway.contract import tag
from gangway.errors import PermanentError
from gangway.step import emit, main_wrapper
from gangway.step.interface import CorpusUri
from gangway.step.tracking import StepTracker

__all__ = ["CORPUS_FORMAT", "StageResult", "build_demo_dataset", "ensure_demo", "stage"]

CORPUS_FORMAT = "bytes-v1"  # uint8 tokens, documents separated by a 0 byte
DOC_SEPARATOR = b"\x00"
_DEMO_EXCLUDE = (
    "test",
    "tests",
    "idlelib",
    "site-packages",
    "lib2to3",
    "turtledemo",
    "__pycache__",
)


@dataclass(frozen=True)
class StageResult:
    """What staging produced; ``digest`` names the data version."""

    digest: str
    corpus_dir: str
    published_uri: str | None
    documents: int
    train_tokens: int
    val_tokens: int
    files_copied: int
    files_skipped: int
    bytes_copied: int
    seconds: float


def _is_val(path: str, val_fraction: float) -> bool:
    h = int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big")
    return (h % 1_000_000) < val_fraction * 1_000_000


def dataset_digest(source_digest: str, val_fraction: float) -> str:
    """The digest that names a corpus: its source files and how they were tokenized."""
    spec = json.dumps(
        {"source": source_digest, "format": CORPUS_FORMAT, "val_fraction": val_fraction},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(spec.encode()).hexdigest()


def _build_corpus(
    raw: Path, files: Sequence[str], out: Path, digest: str, val_fraction: float, source: str
) -> dict[str, Any]:
    text_files = sorted(f for f in files if not f.startswith("_"))
    split = {f: _is_val(f, val_fraction) for f in text_files}
    sizes = {f: (raw / f).stat().st_size for f in text_files}
    if not text_files or sum(sizes.values()) == 0:
        raise PermanentError(f"{source}: the dataset has no text; nothing to train on")
    totals = {True: 0, False: 0}
    for f, is_val in split.items():
        totals[is_val] += sizes[f] + 1
    if totals[True] == 0 or totals[False] == 0:
        part = "validation" if totals[True] == 0 else "training"
        raise PermanentError(
            f"{source}: val_fraction={val_fraction} leaves the {part} split empty with "
            f"{len(text_files)} document(s); add documents or change --val-fraction"
        )
    tmp = Path(tempfile.mkdtemp(prefix=".corpus.tmp-", dir=out.parent))
    try:
        _write_splits(raw, text_files, split, tmp, totals)
        meta = {
            "digest": digest,
            "format": CORPUS_FORMAT,
            "vocab_size": 256,
            "source": source,
            "documents": len(text_files),
            "val_documents": sum(split.values()),
            "train_tokens": totals[False],
            "val_tokens": totals[True],
            "val_fraction": val_fraction,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


def _write_splits(
    raw: Path, text_files: list[str], split: dict[str, bool], tmp: Path, totals: dict[bool, int]
) -> None:
    """``train.bin`` and ``val.bin``: each split's documents in path order, each followed by
    a 0 byte; uint8 tokens with no header, read with ``numpy.memmap``. Plain sequential
    writes (no numpy here: importing it would cost staging a tenth of a second)."""
    with (tmp / "train.bin").open("wb") as train, (tmp / "val.bin").open("wb") as val:
        outs = {False: train, True: val}
        for f in text_files:
            dst = outs[split[f]]
            dst.write((raw / f).read_bytes())
            dst.write(DOC_SEPARATOR)
        written = {v: dst.tell() for v, dst in outs.items()}
    if written != totals:  # a raw file changed while the corpus was built
        raise PermanentError(
            f"{raw}: files changed while the corpus was built (train.bin {written[False]} "
            f"bytes, val.bin {written[True]}; expected {totals[False]} and {totals[True]}); "
            "run staging again"
        )


def stage(
    source: str,
    workdir: Path,
    *,
    val_fraction: float = 0.1,
    publish: str | None = None,
    publish_root: str | None = None,
    workers: int = storage.DEFAULT_WORKERS,
    progress: bool = False,
) -> StageResult:
    """Stage ``source`` into ``workdir`` (idempotent; resumes after interruption).

    The corpus is published at ``publish``, or at ``publish_root/<digest>`` (content-addressed).
    """
    if not 0.0 < val_fraction < 1.0:
        raise PermanentError(f"val_fraction={val_fraction}: must be between 0 and 1 (e.g. 0.1)")
    t0 = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    bar = _Progress("fetch", enabled=progress)
    fetched = storage.fetch_dir(source, workdir / "raw", workers=workers, on_done=bar.add)
    bar.close()
    digest = dataset_digest(fetched.manifest.digest, val_fraction)
    corpus = workdir / "corpus"
    meta_path = corpus / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("digest") != digest:
        meta = _build_corpus(
            workdir / "raw", list(fetched.manifest.files), corpus, digest, val_fraction, source
        )
    published = None
    if publish_root:
        publish = storage.join(publish_root, digest.removeprefix("sha256:")[:32])
    if publish:
        storage.publish_dir(corpus, publish, metadata={"digest": digest, "kind": "corpus"})
        published = publish
    return StageResult(
        digest=digest,
        corpus_dir=str(corpus),
        published_uri=published,
        documents=int(meta["documents"]),
        train_tokens=int(meta["train_tokens"]),
        val_tokens=int(meta["val_tokens"]),
        files_copied=fetched.copied,
        files_skipped=fetched.skipped,
        bytes_copied=fetched.bytes_copied,
        seconds=round(time.perf_counter() - t0, 3),
    )


class _Progress:
    """A plain-text progress line on stderr (steps log to files and the Argo UI, not a TTY)."""

    def __init__(self, label: str, *, enabled: bool) -> None:
        self.label, self.enabled = label, enabled
        self.files = self.bytes = 0
        self.last = 0.0

    def add(self, nbytes: int) -> None:
        self.files += 1
        self.bytes += nbytes
        now = time.monotonic()
        if self.enabled and now - self.last > 1.0:
            self.last = now
            print(f"{self.label}: {self.files} files, {self.bytes / 1e6:.1f} MB", file=sys.stderr)

    def close(self) -> None:
        if self.enabled:
            print(f"{self.label}: {self.files} files, {self.bytes / 1e6:.1f} MB", file=sys.stderr)


def _demo_sources(max_bytes: int) -> list[tuple[Path, str]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    picked: list[tuple[Path, str]] = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if any(part in _DEMO_EXCLUDE or part.startswith("test") for part in rel.parts):
            continue
        picked.append((p, rel.as_posix()))
    return picked


def build_demo_dataset(
    out: str, *, max_bytes: int = 6_000_000, inputs: str | None = None, documents: int = 64
) -> dict[str, Any]:
    """Publish a dataset made of this Python's standard-library sources (no download).

    The first ``max_bytes`` of sources (sorted by path) form the dataset; when ``inputs`` is
    given, ``documents`` further files not in the dataset are written there as a JSONL file of
    ``{"id", "text"}`` documents for batch inference.
    """
    sources = _demo_sources(max_bytes)
    chosen: list[tuple[Path, str]] = []
    total = 0
    rest = iter(sources)
    for src, rel in rest:
        size = src.stat().st_size
        if size == 0:
            continue
        if total + size > max_bytes:
            break
        chosen.append((src, rel))
        total += size
    if not chosen:
        raise PermanentError(f"max_bytes={max_bytes}: too small for even one source file")
    with tempfile.TemporaryDirectory(prefix="gangway-demo-") as tmp:
        for src, rel in chosen:
            dst = Path(tmp, "docs", rel)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        meta = {"name": "python-stdlib", "python": sys.version.split()[0]}
        manifest = storage.publish_dir(Path(tmp), out, metadata=meta)
    result: dict[str, Any] = {
        "uri": out,
        "files": len(manifest.files),
        "bytes": manifest.total_bytes,
        "source_digest": manifest.digest,
    }
    if inputs:
        docs = []
        for src, rel in rest:
            text = src.read_text(encoding="utf-8", errors="replace")[:1500]
            if text.strip():
                docs.append({"id": rel, "text": text})
            if len(docs) >= documents:
                break
        body = "".join(json.dumps(d) + "\n" for d in docs)
        storage.write_bytes(inputs, body.encode())
        result.update(inputs=inputs, input_documents=len(docs))
    return result


def ensure_demo(root: str) -> dict[str, str]:
    """The demo dataset and inference inputs under ``root``, built there once (idempotent)."""
    dataset, inputs = storage.join(root, "dataset"), storage.join(root, "inputs.jsonl")
    if storage.read_manifest(dataset) is None or not storage.exists(inputs):
        build_demo_dataset(dataset, inputs=inputs)
    return {"dataset": dataset, "inputs": inputs}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components.staging",
        description="Stage a published dataset into a byte-level training corpus.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stage", help="copy + verify a dataset, build the corpus, emit its digest")
    STAGE.add_arguments(s)
    s.add_argument("--result-out", type=Path, help="write the result JSON to this file")
    d = sub.add_parser("demo", help="publish a demo dataset built from Python's own sources")
    d.add_argument("--out", required=True, help="where to publish the dataset")
    d.add_argument("--max-bytes", type=int, default=6_000_000, help="dataset size cap")
    d.add_argument("--inputs", help="also write held-out documents (JSONL) here for inference")
    d.add_argument("--documents", type=int, default=64, help="number of inference documents")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        emit(
            build_demo_dataset(
                args.out, max_bytes=args.max_bytes, inputs=args.inputs, documents=args.documents
            ),
            None,
        )
        return 0
    STAGE.read_inputs(args)  # the declared bounds (e.g. --val-fraction in (0, 1))
    source = args.source
    if source == "demo" and not args.demo_root:
        raise PermanentError("--source demo needs --demo-root URI (where the demo data lives)")
    if args.publish and args.publish_root:
        raise PermanentError("give --publish or --publish-root, not both")
    with StepTracker() as tracker:  # open first: an attempt that fails building the demo
        if source == "demo":  # data is recorded too (FAILED), not only its workflow
            source = ensure_demo(args.demo_root)["dataset"]
        result = _stage_tracked(tracker, source, args)
    STAGE.write_outputs(
        args, StageOutputs(digest=result.digest, corpus=CorpusUri(result.published_uri or ""))
    )
    emit(asdict(result), args.result_out)
    return 0


def _stage_tracked(tracker: StepTracker, source: str, args: argparse.Namespace) -> StageResult:
    tracker.log_params({"source": source, "val_fraction": args.val_fraction})
    result = stage(
        source,
        args.workdir,
        val_fraction=args.val_fraction,
        publish=args.publish,
        publish_root=args.publish_root,
        workers=args.workers,
        progress=True,
    )
    tracker.log_dataset(name="corpus", digest=result.digest, source=result.published_uri or source)
    tracker.set_tags(
        {
            tag("dataset_digest"): result.digest,
            tag("dataset_out"): result.digest,
            tag("corpus"): result.published_uri or result.corpus_dir,
        }
    )
    for key in ("documents", "train_tokens", "val_tokens", "files_copied", "bytes_copied"):
        tracker.log_metric(key, float(getattr(result, key)))
    return result


if __name__ == "__main__":
    main_wrapper(main)()
