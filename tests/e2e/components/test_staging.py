"""Staging: copy + verify, resume, corpus building and the dataset digest, on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from components.staging import stage
from gangway import storage
from gangway.errors import NotFoundError, PermanentError
from tests.helpers import run_module


@pytest.fixture
def source(demo_dataset: str, root_uri: str, tmp_path: Path) -> str:
    """The demo dataset republished on the backend under test."""
    local = tmp_path / "copy"
    storage.fetch_dir(demo_dataset, local)
    uri = storage.join(root_uri, "datasets/stdlib")
    storage.publish_dir(local, uri, metadata={"name": "python-stdlib"})
    return uri


def test_stage_builds_corpus_and_names_it(source: str, demo_dataset: str, tmp_path: Path) -> None:
    res = stage(source, tmp_path / "w")
    manifest = storage.read_manifest(source)
    assert manifest is not None
    assert res.files_copied == len(manifest.files) and res.files_skipped == 0
    corpus = Path(res.corpus_dir)
    train = np.memmap(corpus / "train.bin", dtype=np.uint8, mode="r")
    val = np.memmap(corpus / "val.bin", dtype=np.uint8, mode="r")
    # Every byte of every document plus one separator each, split between train and val.
    assert len(train) + len(val) == manifest.total_bytes + len(manifest.files)
    assert res.train_tokens == len(train) and res.val_tokens == len(val) > 0
    assert int((train == 0).sum() + (val == 0).sum()) == len(manifest.files)
    meta = json.loads((corpus / "meta.json").read_text())
    assert meta["digest"] == res.digest and res.digest.startswith("sha256:")
    # The digest names the content, wherever it is stored.
    assert stage(demo_dataset, tmp_path / "w2").digest == res.digest


def test_stage_resumes_without_copying_verified_files(source: str, tmp_path: Path) -> None:
    work = tmp_path / "w"
    first = stage(source, work)
    raw = sorted((work / "raw").rglob("*.py"))
    for p in raw[:5]:  # as if killed before these were copied
        p.unlink()
    again = stage(source, work)
    assert (again.files_copied, again.files_skipped) == (5, first.files_copied - 5)
    assert again.digest == first.digest
    third = stage(source, work)
    assert third.files_copied == 0


def test_val_fraction_changes_the_digest(source: str, tmp_path: Path) -> None:
    a = stage(source, tmp_path / "a", val_fraction=0.1)
    b = stage(source, tmp_path / "b", val_fraction=0.2)
    assert a.digest != b.digest and b.val_tokens > a.val_tokens


def test_publish_corpus_and_reopen_it(source: str, root_uri: str, tmp_path: Path) -> None:
    from components.corpus import open_corpus

    out = storage.join(root_uri, "corpus")
    res = stage(source, tmp_path / "w", publish=out)
    corpus = open_corpus(out, tmp_path / "cache")
    assert corpus.digest == res.digest and len(corpus.train) == res.train_tokens


def test_checksum_mismatch_is_a_clear_permanent_error(source: str, tmp_path: Path) -> None:
    manifest = storage.read_manifest(source)
    assert manifest is not None
    victim = sorted(manifest.files)[3]
    storage.write_bytes(storage.join(source, victim), b"# tampered\n")
    with pytest.raises(PermanentError, match=f"{victim}.*corrupt"):
        stage(source, tmp_path / "w")
    assert not (tmp_path / "w" / "raw" / victim).exists()
    assert not (tmp_path / "w" / "corpus").exists()


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="nothing there"):
        stage(f"file://{tmp_path}/nope", tmp_path / "w")


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5], ids=["zero", "one", "negative"])
def test_bad_val_fraction(demo_dataset: str, tmp_path: Path, fraction: float) -> None:
    with pytest.raises(PermanentError, match="val_fraction"):
        stage(demo_dataset, tmp_path / "w", val_fraction=fraction)


def test_cli_stage_and_errors_without_traceback(demo_dataset: str, tmp_path: Path) -> None:
    digest_file = tmp_path / "digest"
    ok = run_module(
        "components.staging",
        "stage",
        "--source",
        demo_dataset,
        "--workdir",
        str(tmp_path / "w"),
        "--digest-out",
        str(digest_file),
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["digest"] == digest_file.read_text()
    bad = run_module(
        "components.staging",
        "stage",
        "--source",
        f"file://{tmp_path}/missing",
        "--workdir",
        str(tmp_path / "w2"),
    )
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr and "error:" in bad.stderr and "missing" in bad.stderr


def test_demo_dataset_ships_inputs(tmp_path: Path) -> None:
    res = run_module(
        "components.staging",
        "demo",
        "--out",
        f"file://{tmp_path}/ds",
        "--max-bytes",
        "200000",
        "--inputs",
        f"file://{tmp_path}/docs.jsonl",
        "--documents",
        "5",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["files"] > 3 and out["bytes"] <= 200_000 and out["input_documents"] == 5
    docs = [json.loads(x) for x in (tmp_path / "docs.jsonl").read_text().splitlines()]
    manifest = storage.read_manifest(f"file://{tmp_path}/ds")
    assert manifest is not None
    held_out = {d["id"] for d in docs}
    assert not held_out & {k.removeprefix("docs/") for k in manifest.files}


def test_a_stage_attempt_that_fails_building_the_demo_data_is_recorded(tmp_path: Path) -> None:
    """The tracker opened only after the demo data was built: an attempt that failed there
    left no step run in MLflow, only the workflow's FAILED parent."""
    import os

    from gangway.lineage.spool import Spool

    spool = tmp_path / "spool"
    env = {
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db",
        "GANGWAY_LINEAGE_SPOOL": str(spool),
        "GANGWAY_LINEAGE_REPLAY": "later",  # spool only, as in a pipeline
        "GANGWAY_STEP": "stage",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        bad = run_module(
            "components.staging",
            "stage",
            "--source",
            "demo",
            "--demo-root",
            "file:///proc/gangway-no-demo",
            "--workdir",
            str(tmp_path / "w"),
        )
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    records = [r for r, _ in Spool(str(spool)).records()]
    assert [(r.step, r.status) for r in records] == [("stage", "FAILED")]
