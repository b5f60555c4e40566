"""The ``gangway`` command line as a user meets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gangway import storage
from tests.conftest import REPO

GANGWAY = [sys.executable, "-c", "from gangway.cli import main; main()"]


def gangway(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (``env`` replaces the environment when given)."""
    return subprocess.run(
        [*GANGWAY, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        check=False,
        env={**(os.environ if env is None else env), "COLUMNS": "160"},
    )


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


@pytest.mark.e2e
def test_run_reference_pipeline_end_to_end(tmp_path: Path) -> None:
    """The compiled reference pipeline, executed locally: real staging, a 2-pod torchrun gang,
    evaluation of every checkpoint, and inference over every shard exactly once."""
    state = tmp_path / "state"
    argv = [
        "run",
        "pipelines/train_eval_infer.py",
        "--state-dir",
        str(state),
        "-p",
        "train-steps=30",
        "-p",
        "checkpoint-every=10",
        "-p",
        "shards=3",
        "--parallelism",
        "2",
    ]
    res = gangway(*argv)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cached" not in res.stdout
    assert "Succeeded" in res.stdout and "train-eval-infer" in res.stdout
    (run_dir,) = (state / "storage" / "runs").iterdir()
    evaluated = next(n for n in _nodes(state) if n["task"] == "evaluate")
    metrics = json.loads(evaluated["outputs"]["scores"])  # an output parameter of the step
    losses = [c["loss"] for c in metrics["checkpoints"]]
    assert [c["step"] for c in metrics["checkpoints"]] == [10, 20, 30]
    assert losses[-1] < losses[0], f"validation loss should fall: {losses}"
    assert metrics["best"]["loss"] == min(losses)
    preds = sorted((run_dir / "predictions").glob("shard-*.jsonl"))
    assert len(preds) == 3
    ids = [json.loads(line)["id"] for p in preds for line in p.read_text().splitlines()]
    docs = (state / "storage" / "demo" / "inputs.jsonl").read_text().splitlines()
    assert sorted(ids) == sorted(json.loads(d)["id"] for d in docs)  # each exactly once
    assert len(ids) == len(set(ids))
    pods = sorted(p.name for p in (next((state / "runs").iterdir()) / "logs" / "train").iterdir())
    assert pods == ["master-0.log", "worker-0.log"]
    _check_lineage(f"sqlite:///{state}/mlflow.db", run_dir.name)
    assert f"mlflow ui --backend-store-uri sqlite:///{state}/mlflow.db" in res.stdout
    # The same run again on the same data: staging is cached, training runs (it is not
    # cacheable) and writes the very same checkpoints, so their evaluation is cached too.
    again = gangway(*argv)
    assert again.returncode == 0, again.stdout + again.stderr
    nodes = _nodes(state)
    assert {n["task"] for n in nodes if n["cached"]} == {"stage", "evaluate"}
    assert again.stdout.count("cached") >= 2
    new_best = next(n for n in nodes if n["task"] == "evaluate")["outputs"]["best"]
    assert new_best.startswith(f"file://{run_dir}/checkpoints/")  # the first run's, verified


def _nodes(state: Path) -> list[dict[str, Any]]:
    """The nodes of the newest local run in ``state``."""
    newest = max((state / "runs").glob("*/nodes.json"), key=lambda p: p.stat().st_mtime)
    nodes: list[dict[str, Any]] = json.loads(newest.read_text())["nodes"]
    return nodes


def _check_lineage(uri: str, workflow_uid: str) -> None:
    """Every step left a child run under one parent run for the workflow."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("train-eval-infer")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], f"tags.gangway.workflow_uid = '{workflow_uid}'")
    (parent,) = [r for r in runs if r.data.tags["gangway.kind"] == "workflow"]
    assert parent.info.status == "FINISHED"
    steps = sorted(
        r.data.tags["gangway.step"] for r in runs if r.data.tags["gangway.kind"] == "step"
    )
    assert steps == ["evaluate", "infer", "infer", "infer", "split", "stage", "train"]
    train = next(r for r in runs if r.data.tags.get("gangway.step") == "train")
    losses = [m.value for m in client.get_metric_history(train.info.run_id, "loss")]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    # Every checkpoint is a lineage node: an MLflow logged model made by the training run.
    checkpoints = client.search_logged_models(
        [exp.experiment_id], f"tags.`gangway.training_run` = '{train.info.run_id}'"
    )
    assert len(checkpoints) == 3


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
