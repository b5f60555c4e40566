"""Step caching: keys from inputs and the digests of the data read; a hit only when the
outputs verify (:mod:`gangway.step.caching`) — the compiled cache check and Argo's ``memoize``,
run by the local executor on real files (the step: :mod:`tests.helpers.cached_step`)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hera.workflows import DAG

from gangway.errors import PermanentError
from gangway.local import LocalExecutor, workflow_from_template
from gangway.local._results import NodeResult
from gangway.pipeline import pipeline
from gangway.step import caching
from gangway.step.caching import Cache, max_age_seconds
from gangway.step.interface import DatasetUri
from tests.helpers import REPO
from tests.helpers.cached_step import WORK


def _workflow(data: Path, out: str, log: Path, max_age: str) -> dict[str, Any]:
    step = dataclasses.replace(WORK, cache=Cache(max_age))
    with (
        pipeline("cached", team="research", title="t", description="d", parameters={}) as w,
        DAG(name="main"),
    ):
        step(data=DatasetUri(data.as_uri()), out=out, log=str(log))
    manifest: dict[str, Any] = w.to_dict()
    return manifest


@dataclasses.dataclass
class Ran:
    check: NodeResult
    step: NodeResult

    @property
    def cached(self) -> bool:
        return self.step.cached


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello ")
    (data / "b.txt").write_text("world")
    return data, tmp_path / "state", tmp_path / "ran.log"


def _run(
    data: Path,
    state: Path,
    log: Path,
    *,
    out: str = "",
    use_cache: bool = True,
    max_age: str = "720h",
) -> Ran:
    out = out or (state.parent / "outputs" / "v1").as_uri()
    values = {"storage-root": (state / "storage").as_uri(), "mlflow-tracking-uri": ""}
    wf = workflow_from_template(_workflow(data, out, log, max_age), values)
    env = {"PYTHONPATH": str(REPO)}
    result = LocalExecutor(wf, state, use_cache=use_cache, env=env).run()
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes]
    nodes = {n.name: n for n in result.nodes}  # and the workflow's exit handler
    return Ran(nodes["work-cache"], nodes["work"])


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_second_run_on_the_same_data_is_cached(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    first = _run(data, state, log)
    assert not first.cached and _runs(log) == 1
    assert first.check.outputs["verdict"] == "no entry"
    second = _run(data, state, log)
    assert second.cached and second.step.outputs == first.step.outputs and _runs(log) == 1
    assert second.check.outputs["verdict"].startswith("verified: outputs of cached-")
    assert second.step.message.startswith("cached: outputs of cached-")
    assert second.check.outputs["key"] == first.check.outputs["key"]


def test_a_place_does_not_change_the_key(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    assert _run(data, state, log.with_name("other.log")).cached


def test_changed_data_under_the_same_uri_runs_again(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    (data / "b.txt").write_text("there")
    again = _run(data, state, log)
    assert not again.cached and _runs(log) == 2
    assert again.check.outputs["verdict"] == "no entry"  # another key: the data differs
    out = Path(again.step.outputs["result"].removeprefix("file://")) / "result.txt"
    assert out.read_text() == "HELLO THERE"


@pytest.mark.parametrize("harm", ["deleted", "changed"])
def test_a_cached_output_that_is_gone_or_changed_is_not_used(
    setup: tuple[Path, Path, Path], harm: str
) -> None:
    data, state, log = setup
    first = _run(data, state, log)
    result = Path(first.step.outputs["result"].removeprefix("file://")) / "result.txt"
    if harm == "deleted":
        result.unlink()
    else:
        result.write_text("tampered")
    again = _run(data, state, log)
    assert not again.cached and _runs(log) == 2
    verdict = again.check.outputs["verdict"]
    assert verdict.startswith("not used: file://") and verdict.endswith(
        "no longer exists" if harm == "deleted" else "changed since"
    )
    assert again.check.outputs["key"] != first.check.outputs["key"]  # a key no cache holds
    assert result.read_text() == "HELLO WORLD"  # the step ran and wrote it afresh
    assert _run(data, state, log).cached  # and its new record verifies


def test_no_cache_runs_and_an_old_entry_is_not_used(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    again = _run(data, state, log, use_cache=False)
    assert not again.cached and again.step.message.startswith("cache skipped (--no-cache)")
    time.sleep(0.05)
    old = _run(data, state, log, max_age="10ms")
    assert not old.cached and old.check.outputs["verdict"] == "not used: entry older than maxAge"
    assert _runs(log) == 3


def test_storage_trouble_costs_a_rerun_never_a_failure(setup: tuple[Path, Path, Path]) -> None:
    """A record that cannot be read is not used; the step runs and writes a good one."""
    data, state, log = setup
    first = _run(data, state, log)
    record = Path(first.check.outputs["record"].removeprefix("file://"))
    record.write_text("{not json")
    again = _run(data, state, log)
    assert not again.cached and again.check.outputs["verdict"].startswith("not used: unreadable")
    assert json.loads(record.read_text())["key"] == again.check.outputs["key"]
    assert _run(data, state, log).cached


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("720h", 2_592_000.0),
        ("90m", 5400.0),
        ("1h30m", 5400.0),
        ("45s", 45.0),
        ("10ms", 0.01),
        ("7d", 0.0),
        ("", 0.0),
        ("h", 0.0),
        ("1.5h", 5400.0),
    ],
)
def test_max_age_is_a_go_duration(text: str, seconds: float) -> None:
    assert max_age_seconds(text) == pytest.approx(seconds)


def test_a_max_age_argo_cannot_read_is_refused() -> None:
    with pytest.raises(PermanentError, match=r"max_age='7d'.*720h"):
        Cache("7d")


def test_a_step_whose_input_and_output_flags_clash_is_refused() -> None:
    """An output NAME is written with --NAME-out: an input NAME_out would be the same flag."""
    from pydantic import Field

    from gangway.step.interface import Inputs, Outputs, StepSpec

    class In(Inputs):
        report_out: str = Field(description="where")

    class Out(Outputs):
        report: str = Field(description="what")

    with pytest.raises(PermanentError, match="clash on --report-out"):
        StepSpec("s", "components.staging", In, Out)
    with pytest.raises(PermanentError, match="a gang step cannot be cached"):
        StepSpec("g", "components.training", In, gang=True, cache=Cache())


def test_the_reference_pipeline_checks_then_memoizes_staging_and_evaluation() -> None:
    """Both cacheable steps run after a cache check with their own arguments, and Argo
    memoizes each on the key its check gives; training, split and inference are not cached."""
    from gangway.workflows.compiler import compile_pipeline

    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    t = {x["name"]: x for x in wt["spec"]["templates"]}
    tasks = {x["name"]: x for x in t["main"]["dag"]["tasks"]}
    for name in ("stage", "evaluate"):
        memo = t[name]["memoize"]
        assert memo["cache"]["configMap"]["name"] == caching.CACHE_CONFIGMAP
        assert memo["key"] == "{{inputs.parameters.cache-key}}" and memo["maxAge"] == "720h"
        check = t[f"{name}-cache"]["container"]
        assert check["command"] == ["python", "-m", "gangway.step.cache_key"]
        assert check["args"][check["args"].index("--") + 1 :] == t[name]["container"]["args"]
        assert f"{name}-cache" in tasks[name]["depends"]
    spec = json.loads(t["stage-cache"]["container"]["args"][1])
    assert spec["reads"] == ["--source"] and spec["keyed"] == ["--demo-root", "--source"]
    spec = json.loads(t["evaluate-cache"]["container"]["args"][1])
    assert spec["keyed"] == ["--checkpoints", "--corpus"]  # by content; --cache-dir: a place
    assert {"train", "split", "infer"}.isdisjoint(n for n in t if "memoize" in t[n])


def test_a_cacheable_step_cannot_be_fanned_out() -> None:
    from gangway.wiring import EACH

    with (
        pytest.raises(PermanentError, match=r"cacheable step cannot be fanned out"),
        pipeline("c", team="research", title="t", description="d", parameters={}),
        DAG(name="main"),
    ):
        WORK(data=DatasetUri("file:///d"), out=EACH, log="/l", over=["a"])


def test_any_memoized_template_is_memoized_as_argo_does(tmp_path: Path) -> None:
    """A plain Argo ``memoize`` (not a Gangway step) in a local run: the key as written, a
    hit while younger than maxAge, and — as on a cluster — no check of what the outputs name."""
    log = tmp_path / "ran.log"
    code = (
        f"import sys, pathlib; open({str(log)!r}, 'a').write('ran\\n'); "
        "pathlib.Path('/gangway/out').mkdir(); "
        "pathlib.Path('/gangway/out/x').write_text(sys.argv[1])"
    )

    def run(x: str, max_age: str = "1h") -> NodeResult:
        template = {
            "name": "echo",
            "inputs": {"parameters": [{"name": "x"}]},
            "memoize": {
                "key": "echo-{{inputs.parameters.x}}",
                "maxAge": max_age,
                "cache": {"configMap": {"name": "my-cache"}},
            },
            "container": {
                "image": "x",
                "command": ["python", "-c", code],
                "args": ["{{inputs.parameters.x}}"],
            },
            "outputs": {"parameters": [{"name": "x", "valueFrom": {"path": "/gangway/out/x"}}]},
        }
        task = {
            "name": "e",
            "template": "echo",
            "arguments": {"parameters": [{"name": "x", "value": x}]},
        }
        wt = {
            "kind": "WorkflowTemplate",
            "metadata": {"name": "m"},
            "spec": {
                "entrypoint": "main",
                "templates": [template, {"name": "main", "dag": {"tasks": [task]}}],
            },
        }
        result = LocalExecutor(workflow_from_template(wt), tmp_path / "state").run()
        (node,) = result.nodes
        assert node.phase == "Succeeded", node.message
        return node

    assert not run("a").cached
    hit = run("a")
    assert hit.cached and hit.outputs == {"x": "a"}
    assert (tmp_path / "state" / "cache" / "my-cache" / "echo-a.json").is_file()
    assert not run("b").cached
    time.sleep(0.05)
    assert not run("a", max_age="10ms").cached
    assert len(log.read_text().splitlines()) == 3
