"""Gang pods carry ``karpenter.sh/do-not-disrupt: "true"`` (docs/capacity.md): the compiled
pipelines' gangs do, and ``gangway lint`` finds a Volcano Job whose pods do not — missing, or
set to anything but "true" — with the field path and the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from gangway.lint import lint_manifest
from gangway.units import DO_NOT_DISRUPT
from gangway.workflows.compiler import compile_pipeline
from tests.helpers import REPO

Obj = dict[str, Any]
PIPELINES = ("train_eval_infer.py", "train_eval_infer_gpu.py")


def _compiled(pipeline: str) -> Obj:
    return compile_pipeline(REPO / "pipelines" / pipeline)


def _gangs(wt: Obj) -> list[Obj]:
    """Every resource template creating a Volcano Job."""
    return [
        t
        for t in wt["spec"]["templates"]
        if "kind: Job" in str((t.get("resource") or {}).get("manifest") or "")
    ]


def _job(template: Obj) -> Obj:
    """The Job a gang template creates, its placeholders (unquoted counts) filled with 1."""
    job = yaml.safe_load(re.sub(r"\{\{[^}]*\}\}", "1", template["resource"]["manifest"]))
    assert isinstance(job, dict)
    return job


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_every_compiled_gang_pod_is_not_to_be_disrupted(pipeline: str) -> None:
    gangs = _gangs(_compiled(pipeline))
    assert gangs
    for template in gangs:
        for task in _job(template)["spec"]["tasks"]:
            assert task["template"]["metadata"]["annotations"] == {DO_NOT_DISRUPT: "true"}


ANNOTATION = f"{DO_NOT_DISRUPT}: 'true'"


def _with_annotation(wt: Obj, line: str | None) -> tuple[Obj, str]:
    """``wt`` with its first gang's annotation line replaced by ``line`` (None: no
    annotations); the gang's template name."""
    template = _gangs(wt)[0]
    text = template["resource"]["manifest"]
    assert text.count(ANNOTATION) == 2
    if line is None:
        text = re.sub(r"\n *annotations:\n *" + re.escape(ANNOTATION), "", text)
    else:
        text = text.replace(ANNOTATION, line)
    template["resource"]["manifest"] = text
    return wt, str(template["name"])


@pytest.mark.parametrize(
    ("line", "said"),
    [
        pytest.param(None, "missing", id="missing"),
        pytest.param(f"{DO_NOT_DISRUPT}: 'false'", "is 'false'", id="false"),
        pytest.param("gangway.dev/other: x", "missing", id="other-annotations-only"),
    ],
)
def test_a_gang_without_do_not_disrupt_is_a_finding(line: str | None, said: str) -> None:
    wt, name = _with_annotation(_compiled("train_eval_infer_gpu.py"), line)
    found = [f for f in lint_manifest(wt, None) if DO_NOT_DISRUPT in f.path]
    assert [(f.obj, f.path) for f in found] == [
        (
            f"Job in template {name}",
            f"spec.tasks[{i}].template.metadata.annotations.{DO_NOT_DISRUPT}",
        )
        for i in (0, 1)
    ]
    assert all(f.severity == "error" for f in found)
    assert found[0].message.startswith(said)
    assert 'set it to "true"' in found[0].message


def test_a_gang_with_do_not_disrupt_lints_clean_of_it() -> None:
    wt, _ = _with_annotation(_compiled("train_eval_infer_gpu.py"), ANNOTATION)
    assert not [f for f in lint_manifest(wt, None) if DO_NOT_DISRUPT in f.path]


def test_without_the_platform_rules_it_is_not_checked() -> None:
    wt, _ = _with_annotation(_compiled("train_eval_infer_gpu.py"), None)
    assert not [f for f in lint_manifest(wt, None, platform=False) if DO_NOT_DISRUPT in f.path]
