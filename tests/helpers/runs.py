"""Running what tests run for real: the small Argo feature workflows of ``tests/argo_features``
through the local executor (and reading their nodes back), a torchrun gang of the training
component, and its pod logs and workers (fault injection)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import pytest
from hera.workflows import Workflow

import tests.argo_features as features
from tests.argo_features._expected import ANY, Want
from tests.helpers import REPO


def torchrun(data: str, ckpts: str, steps: int, every: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "127.0.0.1:0",
        "--max-restarts",
        "0",
        "-m",
        "components.training",
        "--data",
        data,
        "--checkpoints",
        ckpts,
        "--config",
        "tiny",
        "--set",
        f"steps={steps}",
        "--set",
        f"checkpoint_every={every}",
        *FAST,
    ]
    return subprocess.Popen(argv, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def training_workers(marker: str) -> list[int]:
    """PIDs of this run's torchrun workers (not the agents, not the launcher): their command
    line holds ``marker``, the run's own storage path."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(cmd)
        if (
            marker.encode() in text
            and b"components.training" in text
            and b"torch.distributed.run" not in text
            and (b"gangway.step.launch" not in text)
            and b"-m" in cmd
        ):
            pids.append(int(proc.name))
    return pids


def logged_steps(root: Path) -> list[tuple[str, int]]:
    """(kind, step) events from the gang's pod logs, in order: 'step' and 'resumed'."""
    events = []
    for log in sorted((root / "logs" / "train").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "loss" in rec and "step" in rec:
                events.append(("step", int(rec["step"])))
            elif rec.get("event") == "resumed":
                events.append(("resumed", int(rec["step"])))
    return events


FAST = [
    "--set",
    "model.block_size=64",
    "--set",
    "model.n_embd=64",
    "--set",
    "batch_size=8",
    "--set",
    "log_every=5",
]


class Node(Protocol):
    """A leaf (or Skipped/Omitted) node of a run, as the executor's contract describes it."""

    name: str
    task: str
    template: str
    phase: str
    outputs: dict[str, str]
    result: str | None
    exit_code: int | None
    artifacts: dict[str, str]
    message: str
    attempts: int


class Run(Protocol):
    """The end of a run, as the executor's contract describes it."""

    phase: str
    nodes: Sequence[Node]
    outputs: dict[str, str]
    error: str


def modules() -> list[str]:
    """The workflow modules of ``tests/argo_features`` (helpers start with ``_``)."""
    return sorted(m.name for m in pkgutil.iter_modules(features.__path__) if m.name[0] != "_")


def compiled(module: str) -> dict[str, Any]:
    """The Workflow dict the module's Hera workflow ``w`` compiles to."""
    w = importlib.import_module(f"tests.argo_features.{module}").w
    assert isinstance(w, Workflow), f"{module}.w is not a hera Workflow"
    return dict(w.to_dict())


def contract() -> Any:
    """``gangway.local`` with the executor contract, or a clear failure naming what is missing."""
    try:
        local = importlib.import_module("gangway.local")
        wf_module = importlib.import_module("gangway.local.workflow")
        _ = (local.LocalExecutor, local.resume, wf_module.workflow_from_template)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"the local executor does not offer the contract these tests use: {exc}")
    return local


def executor(module: str, tmp_path: Path, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """The submitted Workflow of ``module`` and a LocalExecutor for it (state under tmp_path)."""
    local = contract()
    wf = importlib.import_module("gangway.local.workflow").workflow_from_template(compiled(module))
    secrets = tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    options: dict[str, Any] = {"parallelism": 4, "auto_resume": False, "secrets_dir": secrets}
    # Hera runner steps import their workflow module, as the image would.
    options["env"] = {"PYTHONPATH": str(REPO)}
    options.update(kwargs)
    return wf, local.LocalExecutor(wf, tmp_path / "state", **options)


def run(module: str, tmp_path: Path, **kwargs: Any) -> Run:
    """Run ``module``'s workflow to its end, as `gangway run FILE` runs it (the library call
    behind it: compile the file, submit the template locally, record, execute)."""
    from gangway.local.session import run_pipeline

    secrets = tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    options: dict[str, Any] = {"parallelism": 4, "auto_resume": False, "secrets_dir": secrets}
    options.update(kwargs)
    path = Path(features.__file__).parent / f"{module}.py"
    res: Run = cast(Run, run_pipeline(path, state_dir=tmp_path / "state", **options).result)
    return res


def phases(res: Run) -> dict[str, str]:
    """Node name -> phase."""
    return {n.name: n.phase for n in res.nodes}


def node(res: Run, name: str) -> Node:
    """The node called ``name``, or a failure listing the nodes there are."""
    for n in res.nodes:
        if n.name == name:
            return n
    pytest.fail(f"no node {name!r}; nodes: {phases(res)}")


def describe(res: Run) -> str:
    """The run, for assertion messages."""
    lines = [f"phase={res.phase} error={res.error!r}"]
    lines += [f"  {n.name}: {n.phase} result={n.result!r} message={n.message!r}" for n in res.nodes]
    return "\n".join(lines)


def text(res: Run) -> str:
    """Every message of the run (the run's error and each node's), lower-cased."""
    return " ".join([res.error, *(n.message for n in res.nodes)]).lower()


def check_nodes(res: Run, want: dict[str, Want], wf_name: str = "") -> None:
    """Exactly the nodes in ``want`` exist, with those phases and (where given) results."""
    want = {k.replace("{wf}", wf_name): v for k, v in want.items()}
    assert set(phases(res)) == set(want), describe(res)
    for name, (phase, result) in want.items():
        n = node(res, name)
        assert phase in (ANY, n.phase), f"{name}: {n.phase}, want {phase}\n{describe(res)}"
        if result is not None:
            assert n.result == result, f"{name}: {n.result!r}, want {result!r}"
