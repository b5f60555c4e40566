"""Batch inference: shards in, each output shard written once, bad shards rejected clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components import checkpoints
from components.inference import infer_shard, read_documents, split_inputs
from gangway import storage
from gangway.errors import PermanentError
from tests.helpers import run_module


@pytest.fixture
def best(trained: str) -> str:
    last = checkpoints.latest(trained)
    assert last is not None
    return last.uri


def _docs(uri: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in storage.read_bytes(uri).decode().splitlines()]


def test_split_and_infer_every_shard_once(
    demo_dataset: str, best: str, root_uri: str, tmp_path: Path
) -> None:
    inputs = demo_dataset.rsplit("/", 1)[0] + "/docs.jsonl"
    shards = split_inputs(inputs, 3, storage.join(root_uri, "shards"))
    assert len(shards) == 3
    all_ids = [d["id"] for s in shards for d in read_documents(s)]
    assert all_ids == [d["id"] for d in read_documents(inputs)]
    outputs = []
    for i, shard in enumerate(shards):
        out = storage.join(root_uri, f"out/shard-{i:05d}.jsonl")
        res = infer_shard(best, shard, out, max_new_tokens=8, cache_dir=tmp_path / "c")
        assert not res["skipped"] and res["documents"] == len(read_documents(shard))
        outputs.append(out)
    rows = [r for o in outputs for r in _docs(o)]
    assert [r["id"] for r in rows] == all_ids  # every document exactly once, in order
    assert all(r["perplexity"] > 1 and isinstance(r["continuation"], str) for r in rows)
    # A re-run skips completed shards and leaves them byte for byte.
    before = storage.read_bytes(outputs[0])
    again = infer_shard(best, shards[0], outputs[0], cache_dir=tmp_path / "c")
    assert again["skipped"] and storage.read_bytes(outputs[0]) == before


def test_modes(best: str, tmp_path: Path) -> None:
    shard = f"file://{tmp_path}/in.jsonl"
    storage.write_bytes(shard, b'{"text": "def f(x):\\n    return x\\n"}\n')
    infer_shard(best, shard, f"file://{tmp_path}/s.jsonl", mode="score")
    infer_shard(best, shard, f"file://{tmp_path}/g.jsonl", mode="generate", max_new_tokens=5)
    (s,), (g,) = _docs(f"file://{tmp_path}/s.jsonl"), _docs(f"file://{tmp_path}/g.jsonl")
    assert "perplexity" in s and "continuation" not in s and s["id"] == "1"
    assert "continuation" in g and "perplexity" not in g


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"", "has no documents", id="empty-shard"),
        pytest.param(b"\n\n", "has no documents", id="blank-lines-only"),
        pytest.param(b'{"text": "ok"}\n{oops\n', "line 2 is not valid JSON", id="malformed-json"),
        pytest.param(b'{"body": "x"}\n', 'line 1 needs a "text"', id="missing-text"),
    ],
)
def test_bad_shards_are_rejected_and_no_output_written(
    best: str, tmp_path: Path, body: bytes, message: str
) -> None:
    shard = f"file://{tmp_path}/in.jsonl"
    storage.write_bytes(shard, body)
    with pytest.raises(PermanentError, match=message):
        infer_shard(best, shard, f"file://{tmp_path}/out.jsonl")
    assert not storage.exists(f"file://{tmp_path}/out.jsonl")


def test_cli_empty_shard_exits_1_without_traceback(best: str, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("")
    res = run_module(
        "components.inference",
        "run",
        "--checkpoint",
        best,
        "--input",
        str(tmp_path / "in.jsonl"),
        "--output",
        str(tmp_path / "out.jsonl"),
    )
    assert res.returncode == 1 and "no documents" in res.stderr and "Traceback" not in res.stderr
