"""Typed pipeline parameters: a Pydantic model compiles to Argo parameters with ``enum`` and
``description``, and ``-p`` values are checked against it before anything runs — every bad
value at once, with what is allowed."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

from gangway.errors import PermanentError
from gangway.params import (
    SCHEMA_ANNOTATION,
    PipelineParams,
    argo_parameters,
    check_values,
    schema_json,
)
from gangway.workflows.compiler import compile_pipeline, to_yaml
from tests.helpers import REPO, gangway

PIPELINE = REPO / "pipelines" / "train_eval_infer.py"


class Precision(StrEnum):
    BF16 = "bf16"
    FP32 = "fp32"


class Params(PipelineParams):
    model: Literal["tiny", "small", "gpu"] = Field("tiny", description="the model preset")
    steps: int = Field(300, ge=1, le=100_000, description="optimizer steps")
    lr: float = Field(3e-4, gt=0, lt=1, description="learning rate")
    compile_model: bool = Field(False, description="torch.compile the model")
    precision: Precision = Precision.BF16
    run_name: str = Field("demo", min_length=1, max_length=20, pattern=r"^[a-z0-9-]+$")


def manifest() -> dict[str, Any]:
    return {"metadata": {"annotations": {SCHEMA_ANNOTATION: schema_json(Params)}}}


def test_fields_compile_to_argo_parameters_with_enum_and_description() -> None:
    params = {p["name"]: p for p in argo_parameters(Params)}
    assert list(params) == ["model", "steps", "lr", "compile-model", "precision", "run-name"]
    assert params["model"] == {
        "name": "model",
        "value": "tiny",
        "enum": ["tiny", "small", "gpu"],
        "description": "the model preset: one of tiny, small, gpu",
    }
    assert params["steps"]["description"] == "optimizer steps: a whole number from 1 to 100000"
    assert params["lr"]["description"] == "learning rate: a number, above 0, below 1"
    assert params["compile-model"]["value"] == "false"
    assert params["precision"]["enum"] == ["bf16", "fp32"]
    assert params["precision"]["value"] == "bf16"


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"model": "tiyn"}, "must be one of tiny, small, gpu — did you mean tiny? (got 'tiyn')"),
        ({"model": "Tiny"}, "did you mean tiny?"),
        ({"steps": "abc"}, "must be a whole number from 1 to 100000 (got 'abc')"),
        ({"steps": "0"}, "must be a whole number from 1 to 100000 (got '0')"),
        ({"steps": "1e3"}, "must be a whole number"),
        ({"steps": "1_000"}, "must be a whole number"),
        ({"steps": "\uff11"}, "must be a whole number"),
        ({"steps": "2.0"}, "must be a whole number"),
        ({"lr": "0"}, "must be a number, above 0, below 1 (got '0')"),
        ({"lr": "nan"}, "must be a number"),
        ({"lr": "inf"}, "must be a number"),
        ({"compile-model": "yes"}, "must be true or false (got 'yes')"),
        ({"precision": "fp16"}, "must be one of bf16, fp32"),
        ({"run-name": ""}, "must be text of 1 to 20 characters"),
        ({"run-name": "x" * 21}, "must be text of 1 to 20 characters"),
        ({"run-name": "My Run"}, "must match ^[a-z0-9-]+$ (got 'My Run')"),
        ({"model": "tiny "}, "must be one of tiny, small, gpu"),
        ({"steps": " 7"}, "remove the spaces around it"),
    ],
    ids=[
        "enum-typo", "enum-case", "int-word", "int-below-minimum", "int-exponent",
        "int-underscores", "int-full-width", "int-as-float", "float-at-exclusive-bound",
        "float-nan", "float-inf", "bool-yes", "enum-class-typo", "str-empty", "str-too-long",
        "str-pattern", "enum-with-a-space", "int-with-spaces",
    ],
)  # fmt: skip
def test_a_bad_value_names_the_parameter_and_what_it_takes(
    values: dict[str, str], problem: str
) -> None:
    found = check_values(manifest(), values)
    assert [name for name, _ in found] == list(values)
    assert problem in found[0][1], found


@pytest.mark.parametrize(
    "values",
    [
        {"model": "gpu", "steps": "100000", "lr": "0.5", "compile-model": "True"},
        {"steps": "7", "lr": "1e-3", "precision": "fp32", "run-name": "a-1"},
        {"image": "anything", "unknown": "x"},  # not typed: for the other checks
    ],
    ids=["bounds-inclusive", "spaces-and-exponent", "untyped-names"],
)
def test_good_values_pass(values: dict[str, str]) -> None:
    assert check_values(manifest(), values) == []


def test_every_bad_value_is_reported_at_once() -> None:
    found = check_values(manifest(), {"model": "x", "steps": "-1", "lr": "2", "run-name": "ok"})
    assert [n for n, _ in found] == ["model", "steps", "lr"]


class NoDefault(PipelineParams):
    steps: int


class BadDefault(PipelineParams):
    steps: int = Field(0, ge=1)


class ListField(PipelineParams):
    layers: list[int] = Field(default_factory=lambda: [1, 2])


@pytest.mark.parametrize(
    ("model", "says"),
    [
        (NoDefault, "NoDefault: give a default to steps"),
        (BadDefault, "BadDefault: a default is not valid: steps"),
        (ListField, "ListField.layers: a workflow parameter is text"),
    ],
    ids=["missing-default", "invalid-default", "list-type"],
)
def test_a_model_argo_cannot_hold_is_refused_when_the_pipeline_is_defined(
    model: type[PipelineParams], says: str
) -> None:
    with pytest.raises(PermanentError, match=says.replace(".", r"\.")):
        argo_parameters(model)


def test_the_reference_pipelines_model_presets_are_the_trainers() -> None:
    from components.model import ModelConfig

    enums = []
    for path in (PIPELINE, PIPELINE.with_name("train_eval_infer_gpu.py")):
        wt = compile_pipeline(path)
        model = next(p for p in wt["spec"]["arguments"]["parameters"] if p["name"] == "model")
        assert set(model["enum"]) <= set(ModelConfig.PRESETS), path
        enums += model["enum"]
    assert set(enums) == set(ModelConfig.PRESETS)  # every preset has a pipeline


def test_compiled_yaml_carries_the_schema_so_submit_checks_it_too(tmp_path: Path) -> None:
    compiled = tmp_path / "wt.yaml"
    compiled.write_text(to_yaml(compile_pipeline(PIPELINE)))
    res = gangway("submit", str(compiled), "--dry-run", "-p", "model=tiyn", "-p", "shards=0")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "-p model: must be one of tiny, small — did you mean tiny?" in res.stderr
    assert "-p shards: must be a whole number from 1 to 1024 (got '0')" in res.stderr
    assert "kind: Workflow" not in res.stdout


class Clash(PipelineParams):
    storage_root: str = "s3://mine"


def test_a_parameter_may_not_shadow_the_platforms() -> None:
    from gangway.pipeline import Defaults, pipeline

    defaults = Defaults("img", "file:///r", "", "q", "pc", "team")
    with pytest.raises(PermanentError, match="parameter 'storage-root' is the platform's"):
        pipeline("x", team="t", title="x", description="x", parameters=Clash, defaults=defaults)


def test_unknown_names_and_bad_values_are_reported_together(tmp_path: Path) -> None:
    res = gangway("run", str(PIPELINE), "--state-dir", str(tmp_path), "-p", "trian-steps=5",
                  "-p", "modle=tiny", "-p", "nodes=0")  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    for says in ("-p trian-steps: unknown parameter (did you mean train-steps?)",
                 "-p modle: unknown parameter (did you mean model?)",
                 "-p nodes: must be a whole number from 1 to 256"):  # fmt: skip
        assert says in res.stderr, res.stderr


@pytest.mark.parametrize(
    "annotation",
    ["{not json", '{"x": {"enum": ["a"]}}', '["x"]'],
    ids=["not-json", "no-type", "not-a-mapping"],
)
def test_a_hand_edited_schema_is_one_clear_error(annotation: str) -> None:
    bad = {"metadata": {"annotations": {SCHEMA_ANNOTATION: annotation}}}
    with pytest.raises(PermanentError, match=SCHEMA_ANNOTATION + ": not"):
        check_values(bad, {"x": "a"})
