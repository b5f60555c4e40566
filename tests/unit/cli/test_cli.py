"""The ``gangway`` command line as a user meets it."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gangway import storage
from gangway.cli import app
from gangway.cli._output import shorten
from gangway.cli._progress import _Lines, progress, steps_table
from gangway.lint._findings import finding
from gangway.local._results import NodeResult
from tests.helpers import REPO, gangway


def test_help_explains_the_commands() -> None:
    res = gangway("--help")
    assert res.returncode == 0
    for word in ("compile", "run", "ls", "version", "Argo"):
        assert word in res.stdout


def test_ls_shows_objects_and_publish_state(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("hello")
    storage.publish_dir(tmp_path / "src", f"file://{tmp_path}/pub")
    res = gangway("ls", f"file://{tmp_path}/pub")
    assert res.returncode == 0, res.stderr
    assert "a.txt" in res.stdout and "published, digest sha256:" in res.stdout


def test_user_error_is_one_line_not_a_traceback() -> None:
    res = gangway("ls", "ftp://nowhere/x")
    assert res.returncode == 1
    assert "unsupported scheme" in res.stderr and "Traceback" not in res.stderr


def test_compile_writes_yaml(tmp_path: Path) -> None:
    out = tmp_path / "wt.yaml"
    res = gangway("compile", "pipelines/train_eval_infer.py", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_text() == (REPO / "pipelines" / "train_eval_infer.yaml").read_text()


def test_run_refuses_an_unsupported_construct(tmp_path: Path) -> None:
    pipeline = tmp_path / "service_pipeline.py"
    pipeline.write_text(
        "from hera.workflows import Resource, Steps, WorkflowTemplate\n"
        "with WorkflowTemplate(name='s', entrypoint='main') as w:\n"
        "    r = Resource(name='svc', action='create',\n"
        "                 manifest='apiVersion: v1\\nkind: Service\\nmetadata: {name: x}')\n"
        "    with Steps(name='main'):\n"
        "        r()\n"
    )
    res = gangway("run", str(pipeline), "--state-dir", str(tmp_path / "st"))
    assert res.returncode == 1
    assert "a v1/Service needs a cluster" in res.stderr and "Traceback" not in res.stderr


def test_run_rejects_unknown_parameter(tmp_path: Path) -> None:
    res = gangway(
        "run", "pipelines/train_eval_infer.py", "-p", "trian-steps=5", "--state-dir", str(tmp_path)
    )
    assert res.returncode == 1
    assert "-p trian-steps: unknown parameter (did you mean train-steps?)" in res.stderr


def test_run_hera_runner_script_with_pydantic_io(tmp_path: Path) -> None:
    """A Hera RunnerScriptConstructor step with Pydantic IO runs locally like in a container."""
    (tmp_path / "runner_pipe.py").write_text(
        "from hera.shared import global_config\n"
        "from hera.workflows import DAG, Input, Output, RunnerScriptConstructor, script\n"
        "from gangway.pipeline import pipeline\n"
        "global_config.experimental_features['script_pydantic_io'] = True\n"
        "class Params(Input):\n    a: int = 2\n    b: int = 3\n"
        "class Result(Output):\n    total: int\n"
        "@script(constructor=RunnerScriptConstructor(), image='{{workflow.parameters.image}}')\n"
        "def add(p: Params) -> Result:\n    return Result(total=p.a + p.b)\n"
        "with pipeline('runner-demo', team='research', title='t', description='d',\n"
        "              parameters={}) as w:\n"
        "    with DAG(name='main'):\n        add(arguments={'a': 5, 'b': 7})\n"
    )
    res = gangway(
        "run",
        str(tmp_path / "runner_pipe.py"),
        "--state-dir",
        str(tmp_path / "st"),
        "-p",
        "mlflow-tracking-uri=",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "total=12" in res.stdout


COMMANDS = [
    *("compile", "run", "retry", "resume", "lint", "submit", "deploy", "status", "logs"),
    *("links", "ls", "lineage", "queues", "explain", "why", "simulate", "manifests"),
    *("snapshot", "version", "manifests render", "snapshot save", "snapshot show", "doctor"),
]
HELP_WIDTH = 78  # click's text width at 80 columns (a margin of two)


def _ragged(text: str) -> list[str]:
    """Lines of a help's prose (up to its first section) that end although the next line's
    first word would still have fit: a line break of the docstring, left standing."""
    lines = [line.rstrip() for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    sections = (i for i, line in enumerate(lines) if line[:1] not in ("", " ") and i > start)
    lines = lines[start : next(sections, len(lines))]
    return [
        a
        for a, b in itertools.pairwise(lines)
        if a.strip() and b.strip() and len(a) - len(a.lstrip()) == len(b) - len(b.lstrip())
        if len(a) + 1 + len(b.split()[0]) <= HELP_WIDTH
    ]


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_reads_cleanly_at_80_columns_and_in_a_pipe(command: str) -> None:
    """Paragraphs re-flow to the width (the docstring's line breaks used to stand as short
    orphan lines); no box, colour or cut word; bracketed text is not read as markup."""
    res = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*command.split(), "--help"])
    assert res.exit_code == 0, res.output
    assert _ragged(res.output) == [], res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80, res.output
    assert not set("\x1b╭│┃") & set(res.output), res.output
    assert "..." not in res.output.split("Commands:")[-1] or "Commands:" not in res.output


def test_help_keeps_bracketed_and_long_words_whole() -> None:
    lint = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["lint", "--help"]).output
    assert "[env: GANGWAY_CRDS_DIR]" in lint  # rich markup used to swallow it
    run = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["run", "--help"]).output
    assert "GANGWAY_SECRET_<SECRET>_<KEY>" in run  # was cut to GANGWAY_SECRET_<SECRET>_<…


def test_help_keeps_a_list_as_written() -> None:
    from gangway.cli._help import command_group

    demo = command_group()

    @demo.command()
    def steps() -> None:
        """Do the steps.

        A paragraph hard-wrapped in the source
        is re-flowed.

        The steps:
        - stage the corpus
        - train the model, which may take a while
        """

    @demo.command()
    def other() -> None:
        """Another command."""

    res = CliRunner(env={"COLUMNS": "80"}).invoke(demo, ["steps", "--help"])
    assert "  A paragraph hard-wrapped in the source is re-flowed.\n" in res.output
    assert "  The steps:\n  - stage the corpus\n  - train the model, which may" in res.output


class _Node:
    """A NodeResult builder: ``_Node("train").outputs(a="1").took(18).build()``."""

    def __init__(self, name: str, template: str = "") -> None:
        self.n = NodeResult(name, name, template or name, phase="Succeeded", attempts=1)

    def outputs(self, **values: str) -> _Node:
        self.n.outputs = dict(values)
        return self

    def took(self, seconds: float) -> _Node:
        self.n.seconds = seconds
        return self

    def failed(self, message: str) -> _Node:
        self.n.phase, self.n.message = "Failed", message
        return self

    def build(self) -> NodeResult:
        return self.n


RUN = "/tmp/state/storage/runs/230add62-0f4b-426a-b9e5-26dee350b1f1"
SEARCH = "tags.`gangway.record` = '7a657677b15b4e069984904f0bb9d363'"


def _render(renderable: Any, width: int = 80) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_run_summary_table_reads_at_80_columns() -> None:
    """It used to fold every output over many lines of a 20-column cell, an MLflow search
    filter where a run link belongs among them."""
    nodes = [
        _Node("stage-cache").outputs(verdict="no entry").took(0.1).build(),
        _Node("stage")
        .outputs(corpus=f"file://{RUN}/corpora/" + "7" * 64, mlflow_run_url=SEARCH)
        .took(1.04)
        .build(),
        _Node("split").outputs(shards=json.dumps([{"input": "a"}] * 4)).took(0.6).build(),
        _Node("evaluate")
        .outputs(best=f"file://{RUN}/checkpoints/train/step-00000020", mlflow_run_url=SEARCH)
        .took(9.5)
        .build(),
        _Node("infer(0:0)").outputs(mlflow_run_url=SEARCH).took(75).build(),
        _Node("wf-1.onExit", "lineage-exit").build(),
        _Node("train").failed("exit 1: the loss went to NaN at step 12; lower the lr").build(),
    ]
    nodes[4].result = json.dumps({"documents": 16, "device": "cpu", "output": f"file://{RUN}"})
    text = _render(steps_table(nodes, "wf-1: Failed in 99s", workflow="wf-1"))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    row = {line.split()[0]: line for line in lines if line and not line.startswith(" ")}
    assert row["stage-cache"].split()[1:4] == ["Succeeded", "1", "0.1s"]
    assert row["infer(0:0)"].split()[3] == "1m15s"
    assert "corpus=file:///tmp/state/storage/runs/" in row["stage"]  # a long last part: its start
    assert row["evaluate"].rstrip().endswith("best=…/checkpoints/train/step-00000020")
    assert "shards=[4 items]" in row["split"]
    assert "result={documents=16, device=cpu}" in row["infer(0:0)"]
    assert "onExit" in row and "gangway.record" not in text  # not a link, and said elsewhere
    said = " ".join(line[row["train"].index("exit 1") :].strip() for line in lines[-2:])
    assert said == "exit 1: the loss went to NaN at step 12; lower the lr"  # wrapped, whole


def test_a_short_json_list_shows_whole_in_the_summary() -> None:
    """``result=[1 item]`` hid a one-word answer; a list that fits shows as it is."""
    nodes = [_Node("pick").took(0.2).build(), _Node("many").took(0.2).build()]
    nodes[0].result = json.dumps(["h100"])
    nodes[1].result = json.dumps([f"shard-{i}" for i in range(8)])
    text = _render(steps_table(nodes, "wf-1: Succeeded in 1s", workflow="wf-1"))
    assert 'result=["h100"]' in text and "result=[8 items]" in text, text


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        pytest.param("short", 10, "short", id="fits"),
        pytest.param("file:///a/b/runs/123/ckpt/step-9", 16, "…/ckpt/step-9", id="uri-end"),
        pytest.param("s3://bucket/" + "f" * 30, 20, "s3://bucket/fffffff…", id="long-last-part"),
        pytest.param("sha256:" + "0" * 64, 12, "sha256:0000…", id="digest-start"),
        pytest.param("a message\nwith  breaks", 30, "a message with breaks", id="one-line"),
        pytest.param("a long message of words", 12, "a long mess…", id="prose-start"),
    ],
)
def test_shorten_keeps_what_tells_values_apart(text: str, width: int, shown: str) -> None:
    assert shorten(text, width) == shown and len(shown) <= width


def test_ls_never_cuts_two_names_to_the_same_text(tmp_path: Path) -> None:
    """Keys alike up to their last characters used to be cut, at 80 columns, to the same
    text: each is now whole, on a line of its own."""
    deep = tmp_path / "checkpoints" / ("run-" + "a" * 40) / "step-0001"
    deep.mkdir(parents=True)
    for i in (1, 2):
        (deep / f"model-weights-shard-0000{i}-of-00002.safetensors").write_text("x")
    res = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["ls", str(tmp_path)])
    assert res.exit_code == 0, res.output
    keys = [line.split("  ", 1)[1] for line in res.output.splitlines()[1:3]]
    rel = sorted(str(p.relative_to(tmp_path)) for p in deep.iterdir())
    assert keys == rel and "…" not in res.output


def test_lint_findings_read_at_80_columns_without_a_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gangway.cli import lint

    out = Console(width=80, file=io.StringIO())
    monkeypatch.setattr(lint, "console", out)
    path = "spec.templates[1].container.securityContext.allowPrivilegeEscalation"
    fix = (
        "requests nvidia.com/gpu but does not select a GPU type; add nodeSelector "
        "nvidia.com/gpu.product: <model> to the template that runs the step"
    )
    found = [finding("Workflow/x", path, "must be false"), finding("Workflow/x", "spec.a", fix)]
    lint._show([(Path("pipelines/p.py"), f) for f in found])
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[:4] == [
        "pipelines/p.py: Workflow/x",
        f"  error: {path}",
        "    must be false",
        "  error: spec.a",
    ]
    assert all(line.startswith("    ") and len(line) <= 80 for line in lines[4:]), lines
    assert " ".join(line.strip() for line in lines[4:]) == fix and len(lines) == 6


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_in_a_pipe_is_lines_as_steps_start_and_end() -> None:
    """`gangway run ... | cat` used to be silent until the run ended (the live table draws
    only on a terminal)."""
    clock, out = _Clock(), Console(width=80, file=io.StringIO())
    lines = _Lines(out=out, clock=clock, every=30.0)
    lines.start(SimpleNamespace(name="wf-1", procs=SimpleNamespace(stopping=None)))  # type: ignore[arg-type]
    train = NodeResult("train", "train", "train", phase="Running")
    lines.event(train)
    clock.now += 29
    lines.tick()  # nothing said for 29 s: not yet
    clock.now += 2
    lines.tick()
    train.message = "exit 75; retry 1 in 10s"
    lines.event(train)
    clock.now += 10
    lines.event(_Node("wf-1.onExit").took(0.2).build())
    train.phase, train.seconds, train.outputs = "Succeeded", 51.0, {"job-phase": "Completed"}
    lines.event(train)
    assert out.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "    0s  train: started",
        "   31s  still running: train (31s)",
        "   31s  train: exit 75; retry 1 in 10s",
        "   41s  onExit: Succeeded in 0.2s",
        "   41s  train: Succeeded in 51.0s — job-phase=Completed",
    ]
    assert isinstance(progress(), _Lines)  # pytest's stdout is no terminal
