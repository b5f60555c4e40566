"""Mistakes caught before anything runs, and never a retry suggested where it cannot help.

Each of these used to surface only after staging had run, followed by "resume with: gangway
retry", which replays the same values. One scenario per mistake, run as a user runs it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import REPO, Output, gangway
from tests.helpers.servers import make_bucket

PIPELINE = "pipelines/train_eval_infer.py"


def _refused_up_front(res: Output, state: Path, *words: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    assert "Traceback" not in out and 'File "' not in out, out[-3000:]
    assert "resume with" not in out and "gangway retry" not in out, out[-3000:]
    for w in words:
        assert w in out, out[-3000:]
    assert not list(state.glob("runs/*/logs/*")), "a step ran"


CPUS = os.cpu_count() or 1
CAP = max(8, 4 * CPUS)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        pytest.param(
            [f"nodes={CAP + 1}"],
            [f"a gang of {CAP + 1} pod(s)", f"at most {CAP} pods", f"-p nodes={CAP + 1}"],
            id="more-pods-than-the-machine-runs",
        ),
        pytest.param(
            ["nodes=8", "procs-per-node=64"],
            ["with 512 training process(es)", f"{CPUS} CPUs", "-p procs-per-node=64"],
            id="512-processes-on-a-small-machine",
        ),
    ],
)
def test_a_gang_larger_than_the_machine_is_refused_with_the_numbers(
    tmp_path: Path, values: list[str], words: list[str]
) -> None:
    args = [a for v in values for a in ("-p", v)]
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), *args)
    _refused_up_front(res, tmp_path, *words, "gangway submit")


@pytest.mark.parametrize(
    ("root", "why"),
    [
        pytest.param("file:///proc/gangway-nope", "No such file or directory", id="proc"),
        pytest.param("file:///etc/hostname/runs", "Not a directory", id="under-a-file"),
    ],
)
def test_an_unwritable_storage_root_is_refused_before_staging(
    tmp_path: Path, root: str, why: str
) -> None:
    res = gangway("run", PIPELINE, "--state-dir", str(tmp_path), "-p", f"storage-root={root}")
    _refused_up_front(res, tmp_path, f"-p storage-root={root}: cannot write there", why)
    assert "nothing was run" in res.stderr


def test_a_missing_bucket_is_refused_before_staging(s3_endpoint: str, tmp_path: Path) -> None:
    bucket = make_bucket(s3_endpoint)
    res = gangway(
        "run",
        PIPELINE,
        "--state-dir",
        str(tmp_path),
        "-p",
        f"storage-root=s3://{bucket}/root",
        "-p",
        "source=s3://gangway-no-such-bucket/corpus",
    )
    _refused_up_front(
        res,
        tmp_path,
        "-p source=s3://gangway-no-such-bucket/corpus:",
        "s3://gangway-no-such-bucket: bucket: not found",
    )


def test_a_permanent_failure_says_what_to_change_not_to_retry(tmp_path: Path) -> None:
    """A source that does not exist fails staging for good (exit 1): the advice is to change
    the value, not to replay it."""
    res = gangway(
        "run", PIPELINE, "--state-dir", str(tmp_path), "-p", f"source={tmp_path}/no-such-data"
    )
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    assert "stage failed for good (exit 1)" in out, out[-3000:]
    assert "start a new run with it changed" in out
    assert "resume with" not in out


def test_an_undeclared_workflow_parameter_is_a_compile_error(tmp_path: Path) -> None:
    """A `p.NAME` (or a hand-written `{{workflow.parameters.NAME}}`) the workflow does not
    declare compiled, then failed when its step was about to run; Argo refuses it at once."""
    src = tmp_path / "undeclared.py"
    src.write_text(
        "from hera.workflows import DAG, Container, Task, Workflow\n"
        "with Workflow(name='undeclared', entrypoint='main') as w:\n"
        "    c = Container(name='say', image='python:3.11',\n"
        "                  command=['echo', '{{workflow.parameters.who}}'])\n"
        "    with DAG(name='main'):\n"
        "        Task(name='say', template=c)\n"
    )
    for args in (["compile", str(src)], ["run", str(src), "--state-dir", str(tmp_path / "s")]):
        res = gangway(*args)
        out = res.stdout + res.stderr
        assert res.returncode == 1 and "Traceback" not in out, out
        assert "{{workflow.parameters.who}} in template say: not a parameter" in out, out
        assert "pipeline(..., parameters=Params)" in out
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(b"garbage: [", "is not readable YAML (while parsing", id="broken-yaml"),
        pytest.param(b"\xff\xfe\x00", "is not readable YAML ('utf-8' codec", id="binary"),
    ],
)
def test_a_crd_directory_with_a_bad_file_names_it(
    tmp_path: Path, content: bytes, says: str
) -> None:
    (tmp_path / "bad.yaml").write_bytes(content)
    res = gangway("lint", PIPELINE, env={**os.environ, "GANGWAY_CRDS_DIR": str(tmp_path)})
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out, out
    assert f"GANGWAY_CRDS_DIR={tmp_path}: {tmp_path}/bad.yaml {says}" in out, out


def test_a_crd_file_that_is_yaml_but_not_shaped_as_a_crd_names_it(tmp_path: Path) -> None:
    (tmp_path / "zz.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: x}\nspec: 5\n"
    )
    res = gangway("lint", PIPELINE, env={**os.environ, "GANGWAY_CRDS_DIR": str(tmp_path)})
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out, out
    assert "CustomResourceDefinition 'x' is not shaped as one" in out, out


def test_compile_never_writes_over_python_source(tmp_path: Path) -> None:
    """`compile P -o P` replaced the pipeline's source with its YAML."""
    src = tmp_path / "p.py"
    src.write_text((REPO / PIPELINE).read_text())
    before = src.read_bytes()
    res = gangway("compile", str(src), "-o", str(src))
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out, out
    assert "that is Python source" in out and src.read_bytes() == before


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        pytest.param("5", "5 is not of type 'object', 'boolean'", id="a-number"),
        pytest.param(
            "{type: object, properties: {spec: {type: 7}}}", "is broken (7 is not", id="bad-type"
        ),
        pytest.param(
            '{type: object, properties: {spec: {$ref: "#/nope"}}}', "PointerToNowhere", id="ref"
        ),
        pytest.param(
            '{type: object, properties: {spec: {type: string, pattern: "(["}}}',
            "'([' is not a 'regex'",
            id="bad-pattern",
        ),
    ],
)
def test_a_broken_crd_schema_is_named_not_a_traceback(
    tmp_path: Path, schema: str, says: str
) -> None:
    (tmp_path / "crd.yaml").write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: workflowtemplates.argoproj.io}\nspec:\n  group: argoproj.io\n"
        "  names: {kind: WorkflowTemplate}\n  versions:\n  - name: v1alpha1\n    schema:\n"
        f"      openAPIV3Schema: {schema}\n"
    )
    res = gangway("lint", PIPELINE, env={**os.environ, "GANGWAY_CRDS_DIR": str(tmp_path)})
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out, out
    assert "the CRD schema of argoproj.io/v1alpha1 WorkflowTemplate is broken" in out, out
    assert says in out, out
