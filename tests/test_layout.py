"""The shape of the tree, as docs/architecture.md describes it: who may import whom, one home
for Volcano, small files and functions. A change that breaks a rule fails here, naming it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PLATFORM = REPO / "platform" / "gangway"
CODE = sorted([*PLATFORM.rglob("*.py"), *(REPO / "components").rglob("*.py")])
MAX_FILE_LINES = 700
"""Not a target to trim to: a file is the size of its concept. This only catches a module that
has become several concepts (a god object such as a 5,000-line compiler); split it by meaning."""
MAX_FUNCTION_LINES = 80


def _module(path: Path) -> str:
    rel = path.relative_to(PLATFORM.parent if PLATFORM in path.parents else REPO)
    return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at any depth (lazy imports inside functions too)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """String constants in code (docstrings left out: prose may name anything)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            yield node.lineno, node.value


# Who may not import whom: (importer package, forbidden package, why).
FORBIDDEN = [
    ("gangway.lint", "gangway.local", "lint and local share gangway.argo, not each other"),
    ("gangway.local", "gangway.lint", "lint and local share gangway.argo, not each other"),
    ("gangway.argo", "gangway.local", "Argo semantics are below both lint and local"),
    ("gangway.argo", "gangway.lint", "Argo semantics are below both lint and local"),
    ("gangway.volcano", "gangway.local", "Volcano's objects are below the executor"),
    ("gangway.step", "components", "the step SDK is for components, not built on them"),
    ("gangway", "components", "the platform does not import the ML code it runs"),
    ("gangway", "gangway.cli", "the CLI parses and renders; nothing is built on it"),
]


@pytest.mark.parametrize(("importer", "forbidden", "why"), FORBIDDEN)
def test_layers(importer: str, forbidden: str, why: str) -> None:
    bad = []
    for path in CODE:
        name = _module(path)
        if not (name == importer or name.startswith(importer + ".")):
            continue
        if importer == "gangway" and (name == forbidden or name.startswith(forbidden + ".")):
            continue  # the CLI's own modules import each other
        for mod in _imports(path):
            if mod == forbidden or mod.startswith(forbidden + "."):
                bad.append(f"{name} imports {mod}")
    assert not bad, f"{why}: " + "; ".join(bad)


VOLCANO_WORDS = (
    "batch.volcano.sh",
    "minAvailable",
    "maxRetry",
    "RestartJob",
    "AbortJob",
    "CompleteJob",
    "TaskCompleted",
    "PodEvicted",
    "retryCount",
)


def test_only_the_volcano_package_spells_volcano() -> None:
    """The API version, field names and actions of a Volcano Job live in gangway.volcano."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {word}"
        for path in CODE
        if PLATFORM / "volcano" not in path.parents
        for line, text in _strings(path)
        for word in VOLCANO_WORDS
        if word in text
    ]
    assert not found, "spell these through gangway.volcano:\n" + "\n".join(found)


def test_files_and_functions_are_small() -> None:
    long_files = [
        f"{p.relative_to(REPO)}: {n} lines"
        for p in CODE
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    ]
    long_functions = [
        f"{p.relative_to(REPO)}:{f.lineno} {f.name}: {f.end_lineno - f.lineno + 1} lines"
        for p in CODE
        for f in ast.walk(ast.parse(p.read_text()))
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        and f.end_lineno is not None
        and f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long_files, f"over {MAX_FILE_LINES} lines: is it one concept? {long_files}"
    assert not long_functions, f"over {MAX_FUNCTION_LINES} lines: name the stages: {long_functions}"


PURE_DECISIONS = (
    "gangway.scheduling.admission",
    "gangway.scheduling.capacity",
    "gangway.scheduling.packing",
    "gangway.scheduling.placement",
    "gangway.scheduling.preemption",
    "gangway.scheduling.pending",
    "gangway.scheduling.snapshot.cluster_state",
    "gangway.scheduling.snapshot.objects",
    "gangway.scheduling.simulation.arrivals",
    "gangway.scheduling.simulation.fgd",
    "gangway.scheduling.simulation.policies",
    "gangway.scheduling.simulation.replay",
)
IO = (
    "kubernetes",
    "mlflow",
    "boto3",
    "requests",
    "gangway.scheduling.snapshot.live",
    "gangway.cluster.settings",
)


def test_decisions_are_pure_functions_over_a_snapshot() -> None:
    """Admission, preemption and placement read a snapshot; only gangway.scheduling.snapshot.live
    and the CLI talk to a cluster."""
    bad = [
        f"{_module(p)} imports {mod}"
        for p in CODE
        if _module(p) in PURE_DECISIONS
        for mod in _imports(p)
        if any(mod == io or mod.startswith(io + ".") for io in IO)
    ]
    assert not bad, "; ".join(bad)
