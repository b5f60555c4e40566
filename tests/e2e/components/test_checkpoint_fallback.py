"""Resuming past an unusable checkpoint (:mod:`components._resume`): training resumes from the
newest checkpoint every rank can use, sets the newer ones aside under ``ROOT/corrupt/`` with
their bytes unchanged, names each and why, and fails for good, moving nothing, when none is
usable. The decision is tested alone; real runs (in process, and 2 ranks under torchrun) check
the rest."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from components import checkpoints
from components._resume import NOTE_NAME, Skipped, agreed, plan_resume, set_aside
from components.config import TrainConfig, load_config
from gangway import storage
from gangway.errors import PermanentError
from gangway.step.tracking import StepTracker
from tests.helpers.runs import torchrun

ROOT = "file:///ck"
NOW = datetime(2026, 12, 2, 13, 36, 32, tzinfo=UTC)


def ckpt(step: int) -> checkpoints.Checkpoint:
    return checkpoints.Checkpoint(checkpoints.step_uri(ROOT, step), step, f"sha256:{step}", {})


def snapshot(uri: str) -> dict[str, bytes]:
    """Every object under ``uri`` and its bytes, by relative key."""
    return {o.key: storage.read_bytes(storage.join(uri, o.key)) for o in storage.list_objects(uri)}


def damage(ck_uri: str, rel: str, data: bytes | None, *, recommit: bool = False) -> None:
    """Overwrite (``data``) or delete (None) one file of a ``file://`` checkpoint; with
    ``recommit`` the manifest is rewritten to match, as if it had been saved that way (so
    only a reader of the file can tell)."""
    path = storage.parse(ck_uri).path / rel
    if data is None:
        path.unlink()
    else:
        path.write_bytes(data)
    if recommit:
        m = storage.read_manifest(ck_uri)
        assert m is not None
        files = {**m.files, rel: {"sha256": storage.sha256_file(path), "size": len(data or b"")}}
        storage.commit_manifest(ck_uri, files, m.metadata)


def zeroed(ck_uri: str) -> None:
    """The newest-checkpoint corruption from the field: a DCP shard's bytes overwritten."""
    shard = next(p for p in sorted(storage.parse(ck_uri).path.iterdir()) if p.suffix == ".distcp")
    damage(ck_uri, shard.name, b"\0" * shard.stat().st_size)


# ---- the decision ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "bad", "chosen", "skipped"),
    [
        pytest.param([], set(), None, [], id="no-checkpoint-starts-fresh"),
        pytest.param([10, 20, 30], set(), 30, [], id="newest-usable"),
        pytest.param([10, 30, 20], {30}, 20, [30], id="newest-corrupt-falls-back-one"),
        pytest.param([10, 20, 30], {30, 20}, 10, [30, 20], id="falls-back-past-several"),
        pytest.param([10, 20, 30], {20}, 30, [], id="an-older-corrupt-one-is-not-read"),
    ],
)
def test_plan_resume_takes_the_newest_usable(
    steps: list[int], bad: set[int], chosen: int | None, skipped: list[int]
) -> None:
    tried: list[int] = []

    def attempt(step: int) -> checkpoints.Checkpoint | Skipped:
        tried.append(step)
        return Skipped(step, ckpt(step).uri, f"step {step} is bad") if step in bad else ckpt(step)

    plan = plan_resume(ROOT, steps, attempt)
    assert (plan.chosen and plan.chosen.step) == chosen
    assert [s.step for s in plan.skipped] == skipped
    assert tried == [*skipped, *([chosen] if chosen is not None else [])]


def test_plan_resume_fails_for_good_naming_each_when_none_is_usable() -> None:
    def attempt(step: int) -> Skipped:
        return Skipped(step, ckpt(step).uri, f"{ckpt(step).uri}: bad bytes")

    with pytest.raises(PermanentError) as err:
        plan_resume(ROOT, [10, 20], attempt)
    text = str(err.value)
    assert "none of the 2 checkpoint(s) under file:///ck" in text
    assert "step-00000020: bad bytes; file:///ck/step-00000010: bad bytes" in text
    assert "rather than start again from step 0" in text and "new one" in text


@pytest.mark.parametrize(
    ("reasons", "verdict"),
    [
        pytest.param([None, None], None, id="every-rank-can-use-it"),
        pytest.param(["bad"], "bad", id="alone"),
        pytest.param(["bad", "bad"], "bad", id="every-rank-saw-the-same"),
        pytest.param([None, "bad"], "rank 1: bad", id="one-rank-alone-skips-it-for-all"),
        pytest.param(["x", "y"], "rank 0: x; rank 1: y", id="ranks-saw-different-things"),
    ],
)
def test_the_gang_agrees_on_every_ranks_verdict(
    reasons: list[str | None], verdict: str | None
) -> None:
    assert agreed(reasons) == verdict


# ---- setting aside, on both backends ---------------------------------------------------------


def publish_fake(root: str, step: int, tmp: Path) -> None:
    src = tmp / f"src-{step}"
    (src / "rng").mkdir(parents=True)
    (src / "__0_0.distcp").write_bytes(bytes(range(256)) * step)
    (src / "rng" / "rank0.pt").write_bytes(b"rng")
    storage.publish_dir(src, checkpoints.step_uri(root, step), metadata={"step": step})


def test_set_aside_moves_it_whole_where_nothing_loads_or_prunes_it(
    root_uri: str, tmp_path: Path
) -> None:
    for step in (2, 4):
        publish_fake(root_uri, step, tmp_path)
    before = snapshot(checkpoints.step_uri(root_uri, 4))

    aside = set_aside(root_uri, 4, "a shard does not match", now=NOW)

    assert aside == f"{root_uri}/corrupt/step-00000004-20261202T133632Z"
    after = snapshot(aside)
    note = json.loads(after.pop(NOTE_NAME))
    assert after == before  # every byte kept, the manifest too
    assert note == {
        "checkpoint": f"{root_uri}/step-00000004",
        "step": 4,
        "why": "a shard does not match",
        "set_aside_at": "2026-12-02T13:36:32+00:00",
    }
    assert not storage.list_objects(checkpoints.step_uri(root_uri, 4))
    assert [c.step for c in checkpoints.complete(root_uri)] == [2]
    # The step can be saved again, and set aside again without a collision.
    publish_fake(root_uri, 4, tmp_path / "again")
    publish_fake(root_uri, 6, tmp_path)
    assert set_aside(root_uri, 4, "again", now=NOW) == f"{aside}-2"
    assert checkpoints.prune(root_uri, keep_last=1) == [2]
    assert snapshot(aside) == {**before, NOTE_NAME: snapshot(aside)[NOTE_NAME]}
    assert [c.step for c in checkpoints.complete(root_uri)] == [6]


# ---- real runs in process (the session's 3-checkpoint run, copied) ---------------------------


def resumable(trained: str, tmp: Path) -> str:
    root = tmp / "ck"
    shutil.copytree(storage.parse(trained).path, root)
    return f"file://{root}"


def config(steps: int, **more: str) -> TrainConfig:
    """The settings of the session's ``trained`` run (checkpoints at 10, 20, 30), to ``steps``."""
    sizes = {"model.block_size": "64", "model.n_embd": "64", "batch_size": "8", "lr": "0.01"}
    return load_config("tiny", {**sizes, "steps": str(steps), "checkpoint_every": "10", **more})


@pytest.mark.parametrize(
    ("corrupt", "why"),
    [
        pytest.param(zeroed, "not matching the manifest's sha256", id="shard-bytes-overwritten"),
        pytest.param(
            lambda uri: damage(uri, "rng/rank0.pt", None),
            "missing or not matching the manifest's sha256 (first: rng/rank0.pt)",
            id="file-missing",
        ),
        pytest.param(
            lambda uri: damage(uri, ".metadata", b"not a pickle", recommit=True),
            "torch.distributed.checkpoint cannot read it",
            id="dcp-cannot-read-it",
        ),
        pytest.param(
            lambda uri: damage(uri, "gangway.json", b"{", recommit=True),
            "gangway.json cannot be read (JSONDecodeError",
            id="config-unreadable",
        ),
        pytest.param(
            lambda uri: damage(uri, "rng/rank0.pt", b"junk", recommit=True),
            "rng/rank0.pt cannot be read",
            id="rng-unreadable",
        ),
    ],
)
def test_an_unusable_newest_checkpoint_is_set_aside_and_training_resumes_before_it(
    corpus_uri: str,
    trained: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    corrupt: Callable[[str], None],
    why: str,
) -> None:
    from components.training import train

    root = resumable(trained, tmp_path)
    newest = checkpoints.step_uri(root, 30)
    corrupt(newest)
    kept = snapshot(newest)
    tracker = StepTracker(env={})

    out = train(config(31), corpus_uri, root, cache_dir=tmp_path / "cache", tracker=tracker)

    assert out["resumed_from"] == 20
    assert [c["step"] for c in out["checkpoints"]] == [30, 31]
    [skipped] = out["skipped_checkpoints"]
    assert skipped["step"] == 30 and why in skipped["why"] and newest in skipped["why"]
    aside = skipped["set_aside"]
    assert aside.startswith(f"{root}/corrupt/step-00000030-")
    assert {k: v for k, v in snapshot(aside).items() if k != NOTE_NAME} == kept
    assert [c.step for c in checkpoints.complete(root)] == [10, 20, 30, 31]
    assert json.loads(tracker.record.tags["gangway.skipped_checkpoints"]) == [aside]
    captured = capsys.readouterr()
    assert "warning: resuming from step 20, not 30: checkpoint step 30 is unusable" in captured.err
    assert '"event": "checkpoint_skipped", "step": 30' in captured.out


def test_evaluation_and_a_second_resume_no_longer_meet_the_set_aside_one(
    corpus_uri: str, trained: str, tmp_path: Path
) -> None:
    from components.evaluation import evaluate
    from components.training import train

    root = resumable(trained, tmp_path)
    zeroed(checkpoints.step_uri(root, 30))
    cache = tmp_path / "cache"
    assert train(config(30), corpus_uri, root, cache_dir=cache)["resumed_from"] == 20
    again = train(config(30), corpus_uri, root, cache_dir=cache)  # a retry: nothing to redo
    assert again["resumed_from"] == 30 and again["skipped_checkpoints"] == []
    m = evaluate(corpus_uri, [c.uri for c in checkpoints.complete(root)], max_tokens=2048)
    assert [r["step"] for r in m["checkpoints"]] == [10, 20, 30] and m["unusable"] == []


def test_when_every_checkpoint_is_unusable_training_fails_naming_each_and_moves_none(
    corpus_uri: str, trained: str, tmp_path: Path
) -> None:
    from components.training import train

    root = resumable(trained, tmp_path)
    for step in (10, 20, 30):
        zeroed(checkpoints.step_uri(root, step))
    before = snapshot(root)
    with pytest.raises(PermanentError) as err:
        train(config(31), corpus_uri, root, cache_dir=tmp_path / "cache")
    assert "none of the 3 checkpoint(s)" in str(err.value)
    for step in (10, 20, 30):
        assert f"step-{step:08d}: 1 file(s) missing or not matching" in str(err.value)
    assert snapshot(root) == before


def test_a_checkpoint_of_another_model_shape_is_refused_not_skipped(
    corpus_uri: str, trained: str, tmp_path: Path
) -> None:
    from components.training import train

    root = resumable(trained, tmp_path)
    before = snapshot(root)
    with pytest.raises(PermanentError, match=r"n_embd: 64 there, 32 here"):
        train(config(31, **{"model.n_embd": "32"}), corpus_uri, root, cache_dir=tmp_path / "c")
    assert snapshot(root) == before


# ---- 2 ranks under torchrun ------------------------------------------------------------------


@pytest.mark.e2e
def test_a_gang_falls_back_past_corrupt_checkpoints_and_a_retry_succeeds(
    corpus_uri: str, tmp_path: Path
) -> None:
    """Step 6's shard is overwritten (every rank sees it) and step 4's ``rng/rank1.pt`` is junk
    under a matching manifest (only rank 1 reads it): both ranks resume from step 2."""
    root = f"file://{tmp_path}/ck"
    first = torchrun(corpus_uri, root, 6, 2, tmp_path / "first.log")
    assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-3000:]
    zeroed(checkpoints.step_uri(root, 6))
    damage(checkpoints.step_uri(root, 4), "rng/rank1.pt", b"junk", recommit=True)
    kept = {step: snapshot(checkpoints.step_uri(root, step)) for step in (4, 6)}

    log = tmp_path / "resume.log"
    assert torchrun(corpus_uri, root, 8, 2, log).wait(timeout=300) == 0, log.read_text()[-3000:]

    text = log.read_text()
    assert '"event": "resumed", "step": 2' in text and '"skipped": [6, 4]' in text
    events = [json.loads(line) for line in text.splitlines() if "checkpoint_skipped" in line]
    assert [e["step"] for e in events] == [6, 4]
    assert "not matching the manifest's sha256 (first: __0_0.distcp)" in events[0]["why"]
    rank_local = events[1]["why"]  # only rank 1 reads rng/rank1.pt: it alone saw the damage
    assert rank_local.startswith("rank 1: ") and "rng/rank1.pt cannot be read" in rank_local
    assert "warning: resuming from step 2, not 6" in text
    for e in events:
        aside = snapshot(e["set_aside"])
        assert {k: v for k, v in aside.items() if k != NOTE_NAME} == kept[e["step"]]
    assert [c.step for c in checkpoints.complete(root)] == [2, 4, 6, 8]

    retry = tmp_path / "retry.log"
    assert torchrun(corpus_uri, root, 8, 2, retry).wait(timeout=300) == 0, retry.read_text()
    assert '"event": "resumed", "step": 8, ' in retry.read_text()
    assert "checkpoint_skipped" not in retry.read_text()
