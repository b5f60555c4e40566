"""The shape of the tree, as docs/architecture.md describes it: who may import whom, one home
for Volcano, small files and functions. A change that breaks a rule fails here, naming it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO

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


# The layers docs/architecture.md draws, from the bottom up: a module imports only from its own
# layer or those below (the longest package prefix decides where a module is).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "gangway",
            "gangway.errors",
            "gangway.contract",
            "gangway.units",
            "gangway.name_values",
            "gangway.user_yaml",
        ),
    ),
    ("config", ("gangway.config",)),
    ("semantics", ("gangway.argo", "gangway.volcano")),
    ("data", ("gangway.storage", "gangway.lineage", "gangway.step")),
    (
        "building",
        (
            "gangway.params",
            "gangway.workflows",
            "gangway.wiring",
            "gangway.pipeline",
            "gangway.render",
        ),
    ),
    ("checking and running", ("gangway.lint", "gangway.local", "gangway.cluster")),
    ("deciding", ("gangway.scheduling", "gangway.evals")),
    ("ML code", ("components",)),
    ("command line", ("gangway.cli",)),
]


def _layer(module: str) -> tuple[int, str] | None:
    """The index and name of ``module``'s layer (None: not Gangway's)."""
    best: tuple[int, int, str] | None = None
    for i, (name, packages) in enumerate(LAYERS):
        for pkg in packages:
            if (module == pkg or module.startswith(pkg + ".")) and (
                best is None or len(pkg) > best[1]
            ):
                best = (i, len(pkg), name)
    return None if best is None else (best[0], best[2])


def test_every_module_has_a_layer() -> None:
    """A new package is placed on the map (and in docs/architecture.md), not left between."""
    top = {
        _module(p).split(".")[1] for p in PLATFORM.rglob("*.py") if p != PLATFORM / "__init__.py"
    }
    placed = {pkg.split(".")[1] for _, pkgs in LAYERS for pkg in pkgs if pkg.count(".") == 1}
    assert top <= placed, f"give these a layer: {sorted(top - placed)}"
    doc = (REPO / "docs" / "architecture.md").read_text()
    missing = sorted(
        str(p.relative_to(PLATFORM))
        for p in PLATFORM.rglob("*.py")
        if p.name != "__init__.py" and str(p.relative_to(PLATFORM)) not in doc
    )
    assert not missing, f"docs/architecture.md does not list: {missing}"


def test_layers_are_imported_only_downwards() -> None:
    """The order of the layers: the step SDK that ships in the image is below the code that
    builds pipelines, the decisions are above what they read, and nothing is built on the CLI."""
    bad = []
    for path in CODE:
        me = _layer(_module(path))
        for mod in _imports(path):
            other = _layer(mod) if mod.startswith(("gangway", "components")) else None
            if me and other and other[0] > me[0]:
                bad.append(f"{_module(path)} ({me[1]}) imports {mod} ({other[1]})")
    assert not bad, "a layer imports one above it:\n" + "\n".join(bad)


def _runtime_imports(path: Path) -> Iterator[str]:
    """What ``path`` imports when it runs (``TYPE_CHECKING`` blocks left out), submodules named
    in a ``from PACKAGE import module`` included."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for n in ast.walk(block)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def test_no_import_cycles() -> None:
    """No module reaches itself through what it imports (a package's own ``__init__`` aside):
    a cycle hides which of two concepts is the lower one."""
    modules = {_module(p): p for p in CODE}
    graph = {
        name: {
            m
            for m in _runtime_imports(path)
            if m in modules and m != name and not name.startswith(m + ".")
        }
        for name, path in modules.items()
    }
    cycles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles))[:20])


# Rules within a layer: (importer package, forbidden package, why).
FORBIDDEN = [
    ("gangway.lint", "gangway.local", "lint and local share gangway.argo, not each other"),
    ("gangway.local", "gangway.lint", "lint and local share gangway.argo, not each other"),
    ("gangway", "components", "the platform does not import the ML code it runs"),
]


@pytest.mark.parametrize(("importer", "forbidden", "why"), FORBIDDEN)
def test_layers(importer: str, forbidden: str, why: str) -> None:
    bad = []
    for path in CODE:
        name = _module(path)
        if not (name == importer or name.startswith(importer + ".")):
            continue
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
    "gangway.scheduling.workload",
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
    "gangway.cluster",
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
