"""Typed wiring: every wiring mistake in a pipeline is an error when it compiles, naming the
pipeline file, the line, the task and the field; and the declaration drives the component's
command line, so what the pipeline passes is what the component parses."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Literal

import pytest

from components.interfaces import EVALUATE, INFER, SPLIT, STAGE, TRAIN
from gangway.errors import PermanentError
from gangway.step.interface import CheckpointUri, CorpusUri, StepSpec
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO, beside_pipelines, gangway

PIPELINE = REPO / "pipelines" / "train_eval_infer.py"
TRAIN_CORPUS = "corpus=stage.corpus,\n        checkpoints=RUN"
EVAL_CORPUS = "corpus=stage.corpus,\n        checkpoints=train"
INFER_END = "over=split.shards,\n        cache_dir=CACHE,\n    )"


def _broken(tmp_path: Path, old: str, new: str) -> tuple[Path, str]:
    """The reference pipeline with one change, beside it (so it imports the same way)."""
    text = PIPELINE.read_text()
    assert text.count(old) >= 1, old
    path = beside_pipelines("broken", tmp_path)
    path.write_text(text.replace(old, new, 1))
    return path, text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        (TRAIN_CORPUS, TRAIN_CORPUS.replace("corpus,", "corpsu,"),
         "task 'stage' has no output 'corpsu' (its outputs: digest, corpus); did you mean "
         "'corpus'?"),
        ("steps=p.train_steps", "stpes=p.train_steps",
         "task 'train': train has no input 'stpes'"),
        ("        " + TRAIN_CORPUS, "        checkpoints=RUN",
         "task 'train': give corpus (required by train)"),
        (EVAL_CORPUS, EVAL_CORPUS.replace("stage.corpus", "train.checkpoints"),
         "task 'evaluate': input 'corpus' takes a corpus (CorpusUri), but train.checkpoints is a "
         "checkpoint root (CheckpointsUri)"),
        ("checkpoint=evaluate.best", "checkpoint=stage.corpus",
         "task 'infer': input 'checkpoint' takes a checkpoint (CheckpointUri), but stage.corpus "
         "is a corpus (CorpusUri)"),
        ("steps=p.train_steps", "steps=p.source",
         "task 'train': input 'steps' takes a whole number, but parameter source is text"),
        ("steps=p.train_steps", 'steps="many"',
         "task 'train': input 'steps': Input should be a valid integer"),
        ("steps=p.train_steps", "steps=p.train_stpes",
         "parameters: no field 'train_stpes'; did you mean 'train_steps'?"),
        ("input=EACH.input", "input=EACH.inptu",
         "task 'infer': input 'input': the items of split.shards have no field 'inptu'"),
        (INFER_END, INFER_END.replace("\n    )", "\n        mode='fast',\n    )"),
         "task 'infer': input 'mode': Input should be 'score', 'generate' or 'both' (got 'fast')"),
        ("over=split.shards", "over=split.shard",
         "task 'split' has no output 'shard' (its outputs: shards); did you mean 'shards'?"),
        ("after=stage,", "after=stage.corpus,", "task 'split': after= takes tasks"),
        ("    split = SPLIT(", "    STAGE(source=p.source, workdir=SCRATCH)\n    split = SPLIT(",
         "task 'stage': a task of that name exists; give name="),
        ('workdir=SCRATCH / "work",', 'workdir=SCRATCH / "work",\n        val_fraction=2,',
         "task 'stage': input 'val_fraction': Input should be less than 1 (got 2)"),
        ("steps=p.train_steps", "steps=True",
         "task 'train': input 'steps': Input should be a valid integer"),
        ("steps=p.train_steps", "steps=100.0",
         "task 'train': input 'steps': Input should be a valid integer"),
        ("log_every=p.log_every", 'log_every="10"',
         "input 'log_every': Input should be a valid integer"),
        ("over=split.shards", "over=[1, 2]",
         "task 'infer': over= takes a list output of a task, not [1, 2]"),
        ("over=split.shards", "over=stage.corpus",
         "over= takes a list output of a task, not stage.corpus"),
        ("        over=split.shards,\n", "        # no over=\n",
         "task 'infer': input 'input' reads EACH: give over=… a list"),
        ('workdir=SCRATCH / "work"', 'workdir="{{workflow.name}}"', "write no '{{…}}' by hand"),
    ],
    ids=["missing-output", "unknown-input", "missing-required-input", "checkpoint-as-corpus",
         "corpus-as-checkpoint", "text-as-number", "bad-constant", "unknown-parameter",
         "unknown-item-field", "value-not-allowed", "fan-out-over-missing-output",
         "after-not-a-task", "same-step-twice-unnamed", "constant-out-of-bounds", "bool-as-int",
         "float-as-int", "text-as-int", "over-a-python-list", "over-a-single-uri",
         "each-without-over", "hand-written-placeholder"],
)  # fmt: skip
def test_a_wiring_mistake_is_a_compile_error_naming_file_line_task_and_field(
    tmp_path: Path, old: str, new: str, says: str
) -> None:
    path, text = _broken(tmp_path, old, new)
    try:
        with pytest.raises(PermanentError) as e:
            compile_pipeline(path)
    finally:
        path.unlink()
    message = str(e.value)
    assert says in message, message
    line = int(re.search(r"\(line (\d+)\)", message).group(1))  # type: ignore[union-attr]
    changed = next(i for i, t in enumerate(text.splitlines(), 1) if new.split("\n")[0] in t)
    assert abs(line - changed) <= 12, (line, changed, message)  # within that task's call
    assert message.startswith(f"{path}")


def test_the_cli_says_it_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    path, _ = _broken(tmp_path, "checkpoint=evaluate.best", "checkpoint=stage.corpus")
    try:
        res = gangway("run", str(path), "--state-dir", str(tmp_path / "s"))
    finally:
        path.unlink()
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "input 'checkpoint' takes a checkpoint" in res.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("spec", [STAGE, SPLIT, TRAIN, EVALUATE, INFER], ids=lambda s: s.name)
def test_the_declaration_is_the_components_command_line(spec: StepSpec) -> None:
    """Every declared input is a flag of the component's own parser, and every output a
    ``--NAME-out`` file (gangs excepted)."""
    import importlib

    module = importlib.import_module(spec.module)
    parser = module._parser()
    if spec.command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[spec.command[0]]
    flags = {s for a in parser._actions for s in a.option_strings}
    assert set(spec.flags().values()) <= flags
    if not spec.gang:
        assert {f"--{o.replace('_', '-')}-out" for o in spec.outputs.model_fields} <= flags


def test_a_bad_flag_value_names_the_flag() -> None:
    from components.staging import main

    with pytest.raises(PermanentError, match=r"--val-fraction: Input should be less than 1"):
        main(["stage", "--source", "demo", "--workdir", "/tmp/x", "--val-fraction", "1.5"])


def test_typed_uris_are_their_own_kinds() -> None:
    corpus = CorpusUri("file:///c")
    assert corpus == "file:///c" and isinstance(corpus, str) and CorpusUri.kind == "corpus"


def test_the_guides_pipeline_compiles_as_written(tmp_path: Path) -> None:
    """docs/writing-pipelines.md's example pipeline, taken from the page."""
    text = (REPO / "docs" / "writing-pipelines.md").read_text()
    code = next(b for b in text.split("```python\n")[1:] if "parameters=Params" in b)
    path = beside_pipelines("guide", tmp_path)
    path.write_text(code.split("```")[0])
    try:
        wt = compile_pipeline(path)
    finally:
        path.unlink()
    tasks = {t["name"]: t for t in wt["spec"]["templates"] if "dag" in t}["main"]["dag"]["tasks"]
    assert [(t["name"], t.get("depends")) for t in tasks] == [
        ("stage-cache", None),  # staging is cacheable: its cache check runs first
        ("stage", "stage-cache"),
        ("split", "stage"),
    ]


def test_none_leaves_a_flag_out_and_fixed_values_are_written_in(tmp_path: Path) -> None:
    text = PIPELINE.read_text()
    text = text.replace("        nodes=p.nodes,\n", "        nodes=3,\n")
    text = text.replace(
        'workdir=SCRATCH / "work",', 'workdir=SCRATCH / "work",\n        publish=None,'
    )
    text = text.replace('out_prefix=RUN / "shards"', "out_prefix=RUN / p.source")
    path = beside_pipelines("ok", tmp_path)
    path.write_text(text)
    try:
        wt = compile_pipeline(path)
    finally:
        path.unlink()
    templates = {t["name"]: t for t in wt["spec"]["templates"]}
    assert "--publish" not in templates["stage"]["container"]["args"]
    assert "minAvailable: 3" in templates["train"]["resource"]["manifest"]
    split = next(t for t in templates["main"]["dag"]["tasks"] if t["name"] == "split")
    passed = {p["name"]: p["value"] for p in split["arguments"]["parameters"]}
    run = "{{workflow.parameters.storage-root}}/runs/{{workflow.uid}}"
    assert passed["out-prefix"] == run + "/{{workflow.parameters.source}}"
    assert "Ref(" not in str(wt)


@pytest.mark.parametrize(
    ("want", "got", "ok"),
    [
        (int, Literal[1, 2, 4], True),
        (float, Literal[0.5, 1], True),
        (int, Literal["a"], False),
        (Literal["score", "generate", "both"], Literal["score", "both"], True),
        (Literal["score", "both"], Literal["score", "generate"], False),
        (str, int, False),
        (CorpusUri, CheckpointUri, False),
        (CorpusUri, str, True),
        (int | None, int, True),
        (Path, str, True),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_type_rules(want: Any, got: Any, ok: bool) -> None:
    from gangway.wiring.types import fits

    assert fits(want, got) is ok
