"""How `gangway run` does on published examples: Hera's `examples/workflows/` and Argo's
`examples/*.yaml`, fetched outside the repository (upstream code is never committed).

    python -m tests.bench.example_corpus --corpus DIR [--jobs 1] [--timeout 60] [--json OUT]

Each file under DIR (category = its parent folder) is compiled (Hera files with the installed
hera; one that does not compile is set aside), classified, then run as a user would:
`gangway run FILE --state-dir TMP --auto-resume` in a subprocess with a timeout. Outcomes:
Succeeded / Failed / Error (the workflow's phase), refused (before anything ran), traceback
(a Python traceback in gangway's own output: always a bug, listed first), timeout.

"Needs only Python and a shell" (the rule): every container, script, init container, sidecar
and containerSet image is a Python image or alpine/busybox/ubuntu/debian/bash (a Hera runner
script counts whatever its image: it needs Python and hera, which the host has), and every
command is Python or a POSIX shell utility (no image-only command such as `cowsay` or
`argosay`, no container relying on its image's entrypoint); no http/plugin/data/resource
template, no templateRef/workflowTemplateRef, no artifact from s3/gcs/git/http/...,
no configMap/secret/downwardAPI volume or env, no envFrom. An example "runs as Argo would" when
its phase is in EXPECTED (default: Succeeded). Not a pytest module (no `test_` prefix).
"""

from __future__ import annotations

import argparse
import json
import re
import runpy
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

GANGWAY = Path(sys.executable).parent / "gangway"
SHELL_IMAGES = {"python", "alpine", "busybox", "ubuntu", "debian", "bash", "library/python"}
SHELL_COMMANDS = {
    *("sh", "bash", "ash", "python", "python3", "echo", "cat", "sleep", "ls", "env", "true"),
    *("false", "printf", "test", "seq", "date", "mkdir", "touch", "cp", "mv", "rm", "head"),
    *("tail", "wc", "grep", "sed", "awk", "tar", "gzip", "find", "exit", "expr", "yes", "tee"),
}
REMOTE_ARTIFACTS = ("s3", "gcs", "git", "http", "artifactory", "hdfs", "oss", "azure")
BAD_VOLUMES = ("configMap", "secret", "downwardAPI", "projected", "nfs", "csi")
LEAF_KINDS = ("container", "script", "containerSet", "suspend", "steps", "dag")
# name (category/stem) -> (phases Argo may end it in, why), from reading each example.
EXPECTED: dict[str, tuple[frozenset[str], str]] = {}
_RANDOM = frozenset({"Succeeded", "Failed"})
_FAILS = frozenset({"Failed"})


def expect(names: str, phases: frozenset[str], why: str) -> None:
    for name in names.split():
        EXPECTED[name] = (phases, why)


_NO_ENTRY = frozenset({"refused"})
_ERRS = frozenset({"Failed", "Error", "refused"})
expect("dags/conditional dags/conditional_on_task_status", _RANDOM, "raises at random (p=0.5)")
expect(
    "steps/recursive_steps",
    _FAILS,
    "its inline script body is `return random.randint(0, 2)`: a SyntaxError in any Python",
)
expect(
    "misc/suspend_input_duration",
    _ERRS,
    "the suspend's input `duration` has no value or default and its step passes none",
)
expect(
    "hera_runner/basic_artifacts",
    _FAILS,
    "an inline (not runner) script whose body is `return ...`: a SyntaxError in any Python",
)
expect(
    "hera_runner/runner_artifacts",
    _FAILS,
    "writer's str is saved raw (Hello, world!); the consumer's json loader cannot parse it",
)
expect(
    "artifacts/artifact_loaders",
    _FAILS,
    "hera 7.1.0's runner opens the unsupplied Optional artifact (annotation.optional is None)",
)
expect(
    "upstream/parameter_aggregation",
    _FAILS,
    "hera 7.1.0 (pydantic 2) compiles Item(__root__=1) to {'__root__': 1}: sh arithmetic fails",
)
expect("upstream/retry_script", _RANDOM, "exits 1 two times in three, 10 retries")
expect(
    "loops/dynamic_fanout_container",
    _ERRS,
    "its command is a whole shell line as one argv[0]: no such executable in the image either",
)
expect("misc/retry_workflow", _RANDOM, "random exit code 0-4, 10 retries: fails 0.8^11 of runs")
expect(
    "upstream/exit_handlers upstream/dag_disable_failFast upstream/dag_continue_on_fail",
    _FAILS,
    "a step exits 1/2 on purpose (`intentional-fail`) with no continueOn covering it",
)
expect("scripts/script_runner_io", _FAILS, "the function returns Output(exit_code=1) on purpose")
expect(
    "scripts/callable_script_v1 experimental/script_pydantic_io"
    " experimental/new_decorators_passthrough_io",
    _NO_ENTRY,
    "no entrypoint: Argo rejects the Workflow (a template needs one given at submit)",
)
expect(
    "dags/callable_dag_with_param_get",
    _ERRS,
    "output names {{hello.outputs...}} without `tasks.`: Argo's validation rejects it",
)
expect(
    "scripts/script_annotations_artifact_custom_volume experimental/"
    "script_annotations_artifact_custom_volume",
    _ERRS,
    "use_artifact_existing_vol() gets no argument for its input artifact: nothing supplies it",
)


@dataclass
class Result:
    name: str
    category: str
    compiles: bool
    shell_only: bool
    why_not: str
    outcome: str
    first_error: str
    seconds: float
    as_argo: bool = False


def compile_file(path: Path) -> dict[str, Any]:
    """The first Workflow-kind manifest of ``path`` (a Hera file or an Argo YAML)."""
    if path.suffix in (".yaml", ".yml"):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        kinds = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
        found = [d for d in docs if d.get("kind") in kinds]
        if not found:
            raise ValueError("no Workflow document")
        return found[0]
    from hera.workflows import Workflow

    sys.path.insert(0, str(path.parent))
    module = runpy.run_path(str(path), run_name=path.stem)
    objs = [v for v in module.values() if isinstance(v, Workflow)]
    objs.sort(key=lambda v: type(v) is not Workflow)  # the file's Workflow before templates
    if not objs:
        raise ValueError("defines no Workflow")
    out: dict[str, Any] = objs[0].to_dict()
    return out


def _image_ok(image: str) -> bool:
    base = image.split("@")[0].rsplit(":", 1)[0] if image else ""
    base = base.split("/", 1)[1] if base.count("/") == 2 else base  # drop a registry
    return base in SHELL_IMAGES


def _container_why(c: dict[str, Any], runner: bool) -> str:
    image = str(c.get("image", ""))
    if not runner and not _image_ok(image):
        return f"image {image}"
    command = c.get("command") or []
    if not command:
        return f"no command (entrypoint of {image})"
    exe = Path(str(command[0])).name
    if exe not in SHELL_COMMANDS and not exe.startswith("python"):
        return f"command {exe}"
    for e in c.get("env") or []:
        ref = (e.get("valueFrom") or {}).keys() - {"fieldRef"}
        if ref:
            return f"env {sorted(ref)[0]}"
    return "envFrom" if c.get("envFrom") else ""


def _template_why(t: dict[str, Any]) -> str:
    for kind in ("http", "plugin", "data", "resource"):
        if kind in t:
            return f"{kind} template"
    for group in t.get("steps") or []:
        for step in group if isinstance(group, list) else [group]:
            if "templateRef" in step:
                return "templateRef"
    for task in (t.get("dag") or {}).get("tasks") or []:
        if "templateRef" in task:
            return "templateRef"
    for art in (t.get("inputs") or {}).get("artifacts") or []:
        for kind in REMOTE_ARTIFACTS:
            if kind in art:
                return f"{kind} artifact"
    for v in t.get("volumes") or []:
        if any(k in v for k in BAD_VOLUMES):
            return "k8s volume"
    source = str((t.get("script") or {}).get("source", ""))
    runner = "hera.workflows.runner" in " ".join((t.get("script") or {}).get("args") or [])
    containers = [t[k] for k in ("container", "script") if k in t]
    containers += (t.get("containerSet") or {}).get("containers") or []
    containers += (t.get("initContainers") or []) + (t.get("sidecars") or [])
    for c in containers:
        why = _container_why(c, runner and c is t.get("script"))
        if why:
            return why
    return "" if source or containers or any(k in t for k in LEAF_KINDS) else "unknown kind"


def classify(manifest: dict[str, Any]) -> str:
    """Why the workflow needs more than Python and a shell ('' when it does not)."""
    spec = manifest.get("spec") or {}
    spec = spec.get("workflowSpec", spec)  # a CronWorkflow
    if "workflowTemplateRef" in spec:
        return "workflowTemplateRef"
    for v in spec.get("volumes") or []:
        if any(k in v for k in BAD_VOLUMES):
            return "k8s volume"
    for t in spec.get("templates") or []:
        why = _template_why(t)
        if why:
            return f"{t.get('name')}: {why}"
    return ""


_PHASE = re.compile(r"^\s*[\w.-]+: (Succeeded|Failed|Error) in \S+\s*$")
_STEP_EVENT = re.compile(r"^\s+\d+[smh]\s")
_ERROR_LINE = re.compile(r"^error: |^\S.* (failed|error): ")


def parse(output: str, rc: int) -> tuple[str, str]:
    """(outcome, first error line) from gangway's output and exit status."""
    lines = output.splitlines()
    phases = [m.group(1) for ln in lines if (m := _PHASE.match(ln)) and not _STEP_EVENT.match(ln)]
    errors = [ln.strip() for ln in lines if _ERROR_LINE.search(ln)]
    first = errors[0] if errors else ""
    if "Traceback (most recent call last)" in output and not phases:
        tail = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
        return "traceback", (tail[-1] if tail else lines[-1] if lines else "")
    if phases:
        return phases[-1], first
    if rc == 0:
        return "Succeeded", ""
    bullets = [ln.strip() for ln in lines if ln.startswith("  - ")]
    return "refused", (bullets[0] if bullets else first or (lines[-1] if lines else ""))


def run_one(path: Path, timeout: float) -> Result:
    category = path.parent.name
    name = f"{category}/{path.stem}"
    probe = subprocess.run(
        [sys.executable, "-m", "tests.bench.example_corpus", "--compile-one", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if probe.returncode != 0:
        err = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return Result(name, category, False, False, "", "does not compile", err, 0.0)
    why = classify(json.loads(probe.stdout))
    if path.suffix != ".py" and not _yaml_supported():
        return Result(name, category, True, not why, why, "refused", "YAML not supported", 0.0)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="corpus-") as state:
        cmd = [str(GANGWAY), "run", str(path), "--state-dir", state, "--auto-resume"]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, cwd=state, check=False
            )
            outcome, first = parse(done.stdout + "\n" + done.stderr, done.returncode)
        except subprocess.TimeoutExpired:
            outcome, first = "timeout", f"no end after {timeout:.0f}s"
    seconds = time.monotonic() - started
    res = Result(name, category, True, not why, why, outcome, first[:300], round(seconds, 2))
    return judged(res)


def judged(res: Result) -> Result:
    """``res`` with ``as_argo`` set: its outcome is one Argo gives the example."""
    res.as_argo = res.outcome in EXPECTED.get(res.name, (frozenset({"Succeeded"}), ""))[0]
    return res


_YAML: list[bool] = []


def _yaml_supported() -> bool:
    """Whether `gangway run` takes a .yaml file (another change adds it)."""
    if not _YAML:
        done = subprocess.run([str(GANGWAY), "run", "--help"], capture_output=True, text=True)
        _YAML.append("yaml" in done.stdout.lower())
    return _YAML[0]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def report(results: list[Result]) -> str:
    order = {"traceback": 0, "timeout": 1, "Error": 2, "Failed": 3, "refused": 4}
    shown = sorted(results, key=lambda r: (order.get(r.outcome, 9), r.as_argo, r.name))
    out = [f"{'example':<42} {'outcome':<9} {'P+S':<3} {'argo':<4} {'time':>5}  first error"]
    out.append("─" * 80)
    for r in shown:
        if r.outcome == "does not compile":
            continue
        mark = "yes" if r.shell_only else "-"
        line = f"{_cut(r.name, 42):<42} {r.outcome:<9} {mark:<3} {'ok' if r.as_argo else '-':<4}"
        out.append(_cut(f"{line} {r.seconds:>5.1f}  {r.first_error}", 80))
    out.append("")
    head = ("category", "files", "compile", "P+S", "argo", "P+S argo")
    out.append("{:<14} {:>5} {:>7} {:>5} {:>5} {:>8}".format(*head))
    for cat in [*sorted({r.category for r in results}), "TOTAL"]:
        rs = [r for r in results if cat in (r.category, "TOTAL")]
        ps = [r for r in rs if r.shell_only]
        counts = (len(rs), sum(r.compiles for r in rs), len(ps), sum(r.as_argo for r in rs))
        out.append(
            f"{cat:<14} {counts[0]:>5} {counts[1]:>7} {counts[2]:>5} {counts[3]:>5}"
            f" {sum(r.as_argo for r in ps):>8}"
        )
    ps = [r for r in results if r.shell_only]
    ok = sum(r.as_argo for r in ps)
    tally = Counter(r.outcome for r in results)
    out.append("\noutcomes: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.items())))
    out.append(
        f"Python+shell examples that run as Argo would: {ok}/{len(ps)}"
        f" ({100 * ok / max(len(ps), 1):.0f}%)"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="run only names containing this")
    ap.add_argument("--merge", type=Path, nargs="*", help="report on saved --json files instead")
    ap.add_argument("--compile-one", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compile_one:
        print(json.dumps(compile_file(args.compile_one), default=str))
        return 0
    if args.merge:  # later files win: a re-run of one example replaces its earlier result
        saved = [Result(**r) for f in args.merge for r in json.loads(f.read_text())]
        results = [judged(r) for r in {r.name: r for r in saved}.values()]
    elif args.corpus is None:
        ap.error("--corpus (or --merge) is required")
    else:
        root = args.corpus.resolve()
        files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".yml"))
        files = [p for p in files if args.only in str(p.relative_to(root))]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda p: run_one(p, args.timeout), files))
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
