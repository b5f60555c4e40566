"""Shared fixtures: a real S3 API server on loopback (moto's server mode), a demo dataset,
URI roots for both storage backends so each test runs against ``file://`` and ``s3://``, and
the CRD schemas the lint tests check against."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.staging import build_demo_dataset, stage
from gangway.lint.crds import CrdSchemas
from tests.helpers import REFERENCE_ARGS, ReferenceRuns, pipeline_run
from tests.helpers.servers import free_port as _free_port
from tests.helpers.servers import make_bucket, start_mlflow_server, stop_server

# `make test` runs two workers on two cores, each starting steps and gangs that size their
# OpenMP pools for the whole machine: a thread that spins while it waits (OpenMP's default)
# takes the core another test's process needs. Waiting threads sleep instead.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """Start ``moto.server`` in its own process on 127.0.0.1 and point the AWS env at it."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_AWS_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


@pytest.fixture(params=["file", "s3"])
def root_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty URI root on each backend."""
    if request.param == "file":
        return f"file://{tmp_path}/store"
    endpoint = request.getfixturevalue("s3_endpoint")
    return f"s3://{make_bucket(endpoint)}/store"


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small published demo dataset (real stdlib sources) plus inference inputs beside it."""
    root = tmp_path_factory.mktemp("dataset")
    uri = f"file://{root}/stdlib"
    build_demo_dataset(uri, max_bytes=1_500_000, inputs=f"file://{root}/docs.jsonl", documents=12)
    return uri


@pytest.fixture(scope="session")
def corpus_uri(demo_dataset: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo dataset staged and published as a corpus."""
    work = tmp_path_factory.mktemp("stage")
    out = f"file://{work}/corpus"
    stage(demo_dataset, work / "w", publish=out)
    return out


@pytest.fixture(scope="session")
def trained(corpus_uri: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A checkpoint root with three complete checkpoints of a very small model."""
    from components.config import load_config
    from components.training import train

    root = tmp_path_factory.mktemp("trained")
    cfg = load_config(
        "tiny",
        {
            "steps": "30",
            "checkpoint_every": "10",
            "model.block_size": "64",
            "model.n_embd": "64",
            "batch_size": "8",
            "lr": "0.01",
        },
    )
    uri = f"file://{root}/ck"
    train(cfg, corpus_uri, uri, cache_dir=root / "cache")
    return uri


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow tracking server (sqlite backend) on 127.0.0.1, in its own process."""
    port = _free_port()
    proc = start_mlflow_server(tmp_path_factory.mktemp("mlflow"), port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(proc)


@pytest.fixture(scope="session")
def schemas() -> CrdSchemas:
    """The Argo + Volcano CRD schemas of ``GANGWAY_CRDS_DIR`` (``.ci/run`` points it at
    ``../shared/crds``); tests that lint skip, saying why, without it."""
    crds = os.environ.get("GANGWAY_CRDS_DIR")
    if not crds:
        pytest.skip(
            "GANGWAY_CRDS_DIR is not set: point it at the Argo + Volcano CRDs "
            "(.ci/run uses ../shared/crds)"
        )
    return CrdSchemas.from_dir(Path(crds))


@pytest.fixture(scope="session")
def reference_runs(tmp_path_factory: pytest.TempPathFactory) -> ReferenceRuns:
    """The one whole run of the reference pipeline the suite shares (and its cached re-run):
    the CLI, lineage and nightly tests read it; a test that changes its MLflow store works on
    a copy (:func:`copy_state`)."""
    state = tmp_path_factory.mktemp("reference") / "state"
    args = ("pipelines/train_eval_infer.py", "--state-dir", str(state), *REFERENCE_ARGS)
    first = pipeline_run(*args)
    second = pipeline_run(*args)
    return ReferenceRuns(state, first, second, args)


COSTLY_SESSION_FIXTURES = ("reference_runs", "mlflow_server")
"""Under ``pytest -n N --dist loadgroup`` (``make test``) a session fixture is made once per
worker. Every test that reads one of these, directly or through another fixture, goes to one
worker, named for it: the suite's reference runs (two whole pipeline runs) are made once, and
the MLflow server (about 12 s of CPU to start) started once."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = [f for f in COSTLY_SESSION_FIXTURES if f in getattr(item, "fixturenames", ())]
        if used:
            item.add_marker(pytest.mark.xdist_group("+".join(used)))
