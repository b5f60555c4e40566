"""Step caching: keys from inputs and the digests of the data read; a hit only when the
outputs verify (:mod:`gangway.caching`), on real files with the local executor."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gangway import caching
from gangway.caching import CACHE_ANNOTATION, Cache, max_age_seconds, memoize_key
from gangway.errors import PermanentError
from gangway.local import LocalExecutor, workflow_from_template

# A step that reads --data (a file:// directory), writes one file under --out and outputs its
# URI; every real run appends a line to the run log, so a cached one shows by its absence.
CODE = (
    "import sys, pathlib, urllib.parse\n"
    "a = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
    "data = pathlib.Path(urllib.parse.urlparse(a['--data']).path)\n"
    "text = ''.join(p.read_text() for p in sorted(data.iterdir()))\n"
    "out = pathlib.Path(urllib.parse.urlparse(a['--out']).path)\n"
    "out.mkdir(parents=True, exist_ok=True)\n"
    "(out / 'result.txt').write_text(text.upper())\n"
    "open(a['--log'], 'a').write('ran\\n')\n"
    "pathlib.Path('out').mkdir(exist_ok=True)\n"
    "pathlib.Path('out/result').write_text(a['--out'])\n"
)


def _workflow(data: Path, out: str, log: Path, max_age: str = "720h") -> dict[str, Any]:
    args = ["--data", str(data.as_uri()), "--out", out, "--log", str(log)]
    how = {"fingerprint": "f1", "reads": ["--data"], "places": ["--log"]}
    template = {
        "name": "work",
        "metadata": {"annotations": {CACHE_ANNOTATION: json.dumps(how)}},
        "memoize": {
            "key": memoize_key("work", args, ["--log"], "f1"),
            "maxAge": max_age,
            "cache": {"configMap": {"name": caching.CACHE_CONFIGMAP}},
        },
        "container": {"image": "x", "command": ["python", "-c", CODE], "args": args},
        "outputs": {
            "parameters": [{"name": "result", "valueFrom": {"path": "/gangway/out/result"}}]
        },
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "cached"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                template,
                {"name": "main", "dag": {"tasks": [{"name": "w", "template": "work"}]}},
            ],
        },
    }


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
) -> Any:
    out = out or (state.parent / "outputs" / "v1").as_uri()
    wf = workflow_from_template(_workflow(data, out, log, max_age))
    result = LocalExecutor(wf, state, use_cache=use_cache).run()
    assert result.phase == "Succeeded", [(n.name, n.message) for n in result.nodes]
    (node,) = result.nodes
    return node


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_second_run_on_the_same_data_is_cached(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    first = _run(data, state, log)
    assert not first.cached and _runs(log) == 1
    second = _run(data, state, log)
    assert second.cached and second.outputs == first.outputs and _runs(log) == 1
    assert second.message.startswith("cached: outputs of cached-")


def test_a_place_does_not_change_the_key(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    assert _run(data, state, log.with_name("other.log")).cached


def test_changed_data_under_the_same_uri_runs_again(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    (data / "b.txt").write_text("there")
    node = _run(data, state, log)
    assert not node.cached and _runs(log) == 2
    out = Path(node.outputs["result"].removeprefix("file://")) / "result.txt"
    assert out.read_text() == "HELLO THERE"


@pytest.mark.parametrize("harm", ["deleted", "changed"])
def test_a_cached_output_that_is_gone_or_changed_is_not_used(
    setup: tuple[Path, Path, Path], harm: str
) -> None:
    data, state, log = setup
    node = _run(data, state, log)
    result = Path(node.outputs["result"].removeprefix("file://")) / "result.txt"
    if harm == "deleted":
        result.unlink()
    else:
        result.write_text("tampered")
    again = _run(data, state, log)
    assert not again.cached and _runs(log) == 2
    assert again.message.startswith("cache entry not used: file://")
    assert result.read_text() == "HELLO WORLD"  # the step ran and wrote it afresh
    assert _run(data, state, log).cached  # and its new entry verifies


def test_no_cache_runs_and_an_old_entry_is_not_used(setup: tuple[Path, Path, Path]) -> None:
    data, state, log = setup
    _run(data, state, log)
    node = _run(data, state, log, use_cache=False)
    assert not node.cached and node.message.startswith("cache skipped (--no-cache)")
    time.sleep(0.05)
    old = _run(data, state, log, max_age="10ms")
    assert not old.cached and "older than maxAge" in old.message
    assert _runs(log) == 3


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


def test_the_argo_key_hashes_every_argument_but_places() -> None:
    key = memoize_key(
        "t",
        [
            "--a",
            "{{inputs.parameters.x}}",
            "--log",
            "/tmp/l",
            "--b",
            "{{workflow.parameters.storage-root}}/runs/{{workflow.uid}}",
        ],
        ["--log"],
        "fp",
    )
    assert key.startswith("t-{{=sprig.sha256sum(") and key.endswith(")}}")
    assert "inputs.parameters['x']" in key and "workflow.parameters['storage-root']" in key
    assert "workflow.uid" in key and "/tmp/l" not in key and "--log" not in key
    with pytest.raises(PermanentError, match=r"tasks\.a\.outputs"):
        memoize_key("t", ["{{tasks.a.outputs.result}}"], [], "fp")


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


def test_argo_memoizes_only_what_it_can_key_by_content() -> None:
    """In the reference pipeline evaluation reads task outputs (the content-addressed corpus,
    this run's checkpoints): memoized. Staging reads the `source` parameter, external data
    Argo could key only by URI: not memoized on a cluster, cached by `gangway run` alone."""
    from gangway.compiler import compile_pipeline
    from tests.conftest import REPO

    wt = compile_pipeline(REPO / "pipelines" / "train_eval_infer.py")
    t = {x["name"]: x for x in wt["spec"]["templates"]}
    assert "memoize" not in t["stage"]
    how = json.loads(t["stage"]["metadata"]["annotations"][CACHE_ANNOTATION])
    assert how["reads"] == ["--source"] and how["maxAge"] == "720h"
    memo = t["evaluate"]["memoize"]
    assert memo["cache"]["configMap"]["name"] == caching.CACHE_CONFIGMAP
    assert "inputs.parameters['corpus']" in memo["key"] and "workflow.uid" in memo["key"]
    assert {"train", "split", "infer"}.isdisjoint(n for n in t if "memoize" in t[n])
