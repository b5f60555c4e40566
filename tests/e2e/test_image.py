"""The runtime image (``Dockerfile``, ``docker/``) agrees with the pods that run it and with
``pyproject.toml``, and its install steps work (``docs/image.md``).

Docker cannot run here, so the image itself is never built. Instead:

* Every run (a few seconds): the Dockerfile's user against the pods' security context
  (``gangway.workflows.templates.RUN_AS_USER``), its ``VARIANT`` argument and install calls; both
  locks against ``pyproject.toml`` and against each other; ``.dockerignore`` against what the
  install copies; ``docker/install.sh``'s plan for cpu and cuda (``--dry-run``) and its refusal of
  any other variant.
* ``-m slow`` (about 4 to 5 minutes on 2 cores, most of it pip writing 2 GB of wheels): the
  image's install steps for real. ``docker/install.sh cpu deps project check compile`` — the
  script and steps the Dockerfile runs — builds a fresh ``python -m venv`` under tmp_path from
  the cpu lock, with ``--require-hashes``; then the venv must hold exactly the lock's packages
  at the lock's versions plus gangway, and import every module the committed pipelines' steps
  run (``python -m MODULE``) from the venv, not from this checkout.

What that install does differently from ``docker build``, and why:

* The interpreter is the one running pytest (this machine's CPython 3.11), not the base image's.
* The cpu torch wheel is taken from a local directory (``GANGWAY_TORCH_FIND_LINKS``, found in
  pip's find-links here) instead of the PyTorch CPU index, which this machine cannot reach. It
  is the same file: the lock's sha256 is checked as in the build, so any other file would fail.
  Without such a directory (and without ``GANGWAY_TORCH_FIND_LINKS`` set) the slow tests skip.
* pip reads this machine's configuration (a local mirror beside PyPI) and its own cache; with
  ``--require-hashes`` where a file comes from does not change what is installed.
* It runs as whoever runs pytest with this machine's g++, not as uid 1000 in the image.
* The cuda lock is checked, never installed: it is several GB of CUDA libraries.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gangway.contract import SCRATCH
from gangway.workflows.templates import RUN_AS_USER
from tests.helpers import REPO

DOCKERFILE = REPO / "Dockerfile"
INSTALL = REPO / "docker" / "install.sh"
VARIANTS = ("cpu", "cuda")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu/torch/"
CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")
"""Packages only the cuda lock may hold: NVIDIA's CUDA wheels and Triton."""
IMAGE_PLATFORM: dict[str, str] = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.16",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.11.16",
    "python_version": "3.11",
    "sys_platform": "linux",
}
"""The environment markers of the image (what the locks are resolved for)."""


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]


def lock(variant: str) -> dict[str, Pin]:
    """``docker/requirements-VARIANT.lock`` by canonical name. Every requirement must be
    ``name==version`` with sha256 hashes: anything else fails here."""
    pins: dict[str, Pin] = {}
    text = (REPO / "docker" / f"requirements-{variant}.lock").read_text()
    for entry in re.split(r"\n(?=\S)", text):
        first = entry.split("\n", 1)[0]
        if first.startswith("#") or not first.strip():
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+) \\", first)
        assert m, f"requirements-{variant}.lock: not an exact pin: {first!r}"
        hashes = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
        assert hashes, f"requirements-{variant}.lock: {first.split()[0]} has no sha256"
        pins[canonicalize_name(m[1])] = Pin(m[2], hashes)
    return pins


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def runtime_requirements() -> list[Requirement]:
    """What the image installs: the core dependencies and the ``train`` and ``tracking`` extras."""
    project = pyproject()["project"]
    assert isinstance(project, dict)
    extras = project["optional-dependencies"]
    return [
        Requirement(r) for r in (*project["dependencies"], *extras["train"], *extras["tracking"])
    ]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of every instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def install_sh(*args: str) -> subprocess.CompletedProcess[str]:
    """Run docker/install.sh as the Dockerfile does, with none of this shell's GANGWAY_ settings."""
    return subprocess.run(
        ["bash", str(INSTALL), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")},
            "GANGWAY_VENV": "/opt/venv",
        },
    )


def plan(variant: str, *steps: str) -> list[list[str]]:
    """The commands ``install.sh --dry-run VARIANT STEPS`` would run."""
    r = install_sh("--dry-run", variant, *steps)
    assert r.returncode == 0, r.stderr
    return [shlex.split(line[2:]) for line in r.stderr.splitlines() if line.startswith("+ ")]


# --- the Dockerfile -------------------------------------------------------------------------


def test_dockerfile_user_is_the_pods_user() -> None:
    """The pods run as RUN_AS_USER (uid, gid and fsGroup) with runAsNonRoot: the image's user
    must be that uid with a passwd entry, and USER numeric so the kubelet can check it."""
    run = " && ".join(a for i, a in dockerfile_instructions() if i == "RUN")
    uid = str(RUN_AS_USER)
    assert re.search(rf"groupadd --gid {uid} gangway\b", run)
    assert re.search(rf"useradd --uid {uid} --gid {uid} .*\bgangway\b", run)
    assert re.search(rf"install -d -o {uid} -g {uid} {SCRATCH}\b", run)
    users = [a for i, a in dockerfile_instructions() if i == "USER"]
    assert users == [f"{uid}:{uid}"]
    assert [a for i, a in dockerfile_instructions() if i == "WORKDIR"] == [SCRATCH]


def test_dockerfile_runs_install_sh_for_its_variant() -> None:
    """``ARG VARIANT=cpu``, and every install step goes through docker/install.sh with it (the
    script is what refuses a variant other than cpu or cuda)."""
    instructions = dockerfile_instructions()
    assert ("ARG", "VARIANT=cpu") in instructions
    calls = [a for i, a in instructions if i == "RUN" and "install.sh" in a]
    steps: list[str] = []
    for call in calls:
        words = shlex.split(call)
        at = next(n for n, w in enumerate(words) if w.endswith("/docker/install.sh"))
        assert words[at + 1] == "${VARIANT}", call
        steps += words[at + 2 :]
    assert steps == ["deps", "project", "check", "compile"]
    assert not any(i == "RUN" and "pip install" in a for i, a in instructions), (
        "install steps belong in docker/install.sh, where the test runs them"
    )


def test_dockerfile_base_is_python_311_pinned() -> None:
    """The locks are resolved for CPython 3.11 on x86_64 glibc: the base image is that, by
    exact version (or digest), never a moving tag."""
    base = next(
        a for i, a in dockerfile_instructions() if i == "ARG" and a.startswith("BASE_IMAGE=")
    )
    assert re.fullmatch(r"BASE_IMAGE=python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    assert ("FROM", "${BASE_IMAGE}") in dockerfile_instructions()


def test_dockerignore_lets_through_what_install_copies() -> None:
    """An allow-list: everything is ignored but the paths the project step copies and docker/."""
    lines = [
        ln.strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    tar = next(c for c in plan("cpu", "project") if c[0] == "tar" and "-cf" in c)
    copied = tar[tar.index("-cf") + 2 :]
    assert set(copied) | {"docker"} == allowed


# --- docker/install.sh ------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("variant", VARIANTS)
def test_install_plan_uses_the_variants_lock_with_hashes(variant: str) -> None:
    pip_installs = [
        c for c in plan(variant, "deps", "project") if c[1:4] == ["-m", "pip", "install"]
    ]
    deps, project = pip_installs
    assert deps[-2:] == ["-r", str(REPO / "docker" / f"requirements-{variant}.lock")]
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(deps)
    # Only the cpu torch comes from outside PyPI, through a page listing torch alone.
    if variant == "cpu":
        assert deps[deps.index("--find-links") + 1] == TORCH_CPU_INDEX
    else:
        assert "--find-links" not in deps
    assert {"--no-deps", "--no-build-isolation", "--no-index"} <= set(project)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["gpu"], "unknown VARIANT 'gpu': must be one of: cpu cuda", id="gpu"),
        pytest.param(["CPU"], "unknown VARIANT 'CPU': must be one of: cpu cuda", id="upper-case"),
        pytest.param([""], "missing VARIANT: must be one of: cpu cuda", id="empty"),
        pytest.param([], "missing VARIANT: must be one of: cpu cuda", id="none"),
        pytest.param(["cuda", "test"], "unknown STEP 'test'", id="unknown-step"),
    ],
)
def test_install_refuses_bad_arguments(args: list[str], message: str) -> None:
    r = install_sh(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "+ " not in r.stderr, "nothing may run before the arguments are checked"


# --- the locks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_lock_satisfies_pyproject(variant: str) -> None:
    """Every runtime requirement of pyproject.toml (core, train, tracking) is in the lock at a
    version it allows: a changed pin without ``docker/lock.sh`` fails here."""
    pins = lock(variant)
    for req in runtime_requirements():
        if req.marker is not None and not req.marker.evaluate(IMAGE_PLATFORM):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements-{variant}.lock: run docker/lock.sh"
        assert req.specifier.contains(pins[name].version, prereleases=True), (
            f"requirements-{variant}.lock has {name}=={pins[name].version}, pyproject.toml wants "
            f"{req}: run docker/lock.sh"
        )


def test_locks_differ_only_in_torch_and_cuda() -> None:
    """The same versions of everything both hold; cuda adds the CUDA wheels; torch is the same
    release, +cpu (docker/overrides-cpu.txt) on one side and PyPI's CUDA build on the other."""
    cpu, cuda = lock("cpu"), lock("cuda")
    assert set(cpu) <= set(cuda)
    assert all(CUDA_ONLY.match(n) for n in set(cuda) - set(cpu))
    shared = set(cpu) - {"torch"}
    assert {n: cpu[n].version for n in shared} == {n: cuda[n].version for n in shared}
    assert cpu["torch"].version == f"{cuda['torch'].version}+cpu"
    overrides = (REPO / "docker" / "overrides-cpu.txt").read_text().split()
    assert f"torch=={cpu['torch'].version}" in overrides


@pytest.mark.parametrize("variant", VARIANTS)
def test_lock_holds_no_dev_tools(variant: str) -> None:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    dev = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["dev"]}
    assert not dev & set(lock(variant))


# --- the install, for real (-m slow) --------------------------------------------------------


def _pip_find_links() -> Iterator[Path]:
    """The directories pip searches here (PIP_FIND_LINKS and pip's configuration)."""
    listed = os.environ.get("PIP_FIND_LINKS", "").split()
    config = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    for line in config.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            listed += value.strip("'\"").split()
    for entry in listed:
        path = Path(entry.removeprefix("file://"))
        if path.is_dir():
            yield path


def _torch_cpu_wheels() -> str:
    """Where the slow tests take the cpu torch wheel from: GANGWAY_TORCH_FIND_LINKS if set,
    else a local directory pip searches that holds the locked wheel; skip if neither."""
    if given := os.environ.get("GANGWAY_TORCH_FIND_LINKS"):
        return given
    version = lock("cpu")["torch"].version
    for directory in _pip_find_links():
        if any(directory.glob(f"torch-{version}-cp311-cp311-manylinux*_x86_64.whl")):
            return str(directory)
    pytest.skip(
        f"no local torch {version} wheel and the PyTorch CPU index is unreachable from here: set "
        f"GANGWAY_TORCH_FIND_LINKS={TORCH_CPU_INDEX} (or a directory holding the wheel)"
    )


def _in_venv(venv: Path, code: str, cwd: Path) -> str:
    """Run ``code`` with the venv's Python, away from this checkout (so ``components`` cannot be
    imported from it) and without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stdout


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv filled by ``docker/install.sh cpu`` with every step the Dockerfile runs."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the locks are resolved for Python 3.11")
    wheels = _torch_cpu_wheels()
    venv = tmp_path_factory.mktemp("image") / "venv"
    r = subprocess.run(
        ["bash", str(INSTALL), "cpu", "deps", "project", "check", "compile"],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        env={
            **os.environ,
            "GANGWAY_VENV": str(venv),
            "GANGWAY_PYTHON": sys.executable,
            "GANGWAY_TORCH_FIND_LINKS": wheels,
        },
    )
    if r.returncode != 0:
        pytest.fail(
            f"docker/install.sh cpu failed ({r.returncode}):\n{(r.stdout + r.stderr)[-6000:]}"
        )
    return venv


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_image_venv_holds_exactly_the_lock(image_venv: Path, tmp_path: Path) -> None:
    """Every locked package at its locked version, gangway, and nothing else (pip aside, which
    ``python -m venv`` brings): no dev tools, nothing resolved behind the lock's back."""
    out = _in_venv(
        image_venv,
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))",
        tmp_path,
    )
    installed = {canonicalize_name(n): v for n, v in json.loads(out).items()}
    installed.pop(canonicalize_name("pip"))
    project = pyproject()["project"]
    assert isinstance(project, dict)
    expected = {n: p.version for n, p in lock("cpu").items()} | {"gangway": project["version"]}
    assert installed == expected


def _step_modules() -> set[str]:
    """Every ``python -m MODULE`` (and ``torchrun ... -m MODULE``) in the committed pipelines,
    the gang steps' too: their pods' commands are inside the Volcano Job manifest, YAML text
    within the YAML, so this reads the text rather than the parsed tree."""
    modules: set[str] = set()
    for golden in sorted((REPO / "pipelines").glob("*.yaml")):
        modules |= set(
            re.findall(r"^\s*- -m\s*\n\s*- ([A-Za-z_][\w.]*)\s*$", golden.read_text(), re.M)
        )
    return modules


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_image_venv_runs_every_step_module(image_venv: Path, tmp_path: Path) -> None:
    """The modules the committed pipelines run import from the venv (an installed, non-editable
    gangway), and ``gangway --help`` works there."""
    modules = _step_modules()
    assert {"components.training", "gangway.step.launch"} <= modules
    out = _in_venv(
        image_venv,
        "import importlib, json, sys; "
        f"mods = {sorted(modules)!r}; "
        "print(json.dumps({m: importlib.import_module(m).__file__ for m in mods}))",
        tmp_path,
    )
    site = image_venv / "lib" / "python3.11" / "site-packages"
    for module, file in json.loads(out).items():
        assert Path(file).is_relative_to(site), f"{module} imported from {file}, not the venv"
    r = subprocess.run(
        [str(image_venv / "bin" / "gangway"), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "Usage" in r.stdout
