"""A local run as it goes and as it ended: the steps table, and how progress shows.

On a terminal the steps table is live, redrawn in place as steps start and end. Anywhere else
(a pipe, a file, CI) progress is plain lines, written as it happens: one when a step starts,
one when it has news (a retry, a suspend), one when it ends (its status, time and outputs),
and ``still running: train (95s)`` after every 30 s with nothing said — no colour, no
redraw. Either way the run ends with the whole table (:func:`steps_table`), which reads at 80
columns: step, status, tries and time never wrap; each output keeps one line, shortened to the
room there is (a URI keeps its end).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gangway.cli._output import Fitted, console, err_console, shorten
from gangway.step.progress import Progress, read_dir

if TYPE_CHECKING:
    from gangway.local import LocalExecutor, NodeResult
    from gangway.local.session import Watch

__all__ = ["progress", "steps_table"]

_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Error": "red",
    "Running": "yellow",
    "Skipped": "dim",
    "Omitted": "dim",
}


def steps_table(
    nodes: Sequence[NodeResult],
    title: str,
    *,
    workflow: str = "",
    progress: Callable[[NodeResult], str] | None = None,
) -> Table:
    """One row a step: its name (less the ``workflow.`` of an exit handler), status, tries,
    time, and its outputs or message — for a running step, its ``progress`` where it reports
    some (``step 40/300 · 35.2k tok/s · ETA 1m 5s · ckpt 12s ago``)."""
    table = Table(
        title=title,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("step", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("tries", no_wrap=True, justify="right")
    table.add_column("time", no_wrap=True, justify="right")
    table.add_column("outputs / message")
    for n in nodes:
        status = (
            Text("cached", style="cyan") if n.cached else Text(n.phase, _STYLE.get(n.phase, ""))
        )
        items = _items(n)
        said = progress(n) if progress is not None and n.phase == "Running" else ""
        table.add_row(
            n.name.removeprefix(f"{workflow}.") if workflow else n.name,
            status,
            str(n.attempts or ""),
            _seconds(n.seconds),
            Text(said) if said else Fitted(items) if items else Text(n.message),
        )
    return table


class RunProgress:
    """A running step's progress, read from the run's metrics directory at most once every
    ``every`` seconds (the live table redraws four times a second)."""

    def __init__(self, every: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self.read_at = -every
        self.known: dict[str, Progress] = {}

    def refresh(self, ex: LocalExecutor) -> None:
        if self.clock() - self.read_at < self.every:
            return
        self.read_at = self.clock()
        try:
            found = read_dir(ex.metrics_dir)
        except Exception:  # a file being written: the next read has it
            return
        self.known = {step: p for (wf, step), p in found.items() if wf == ex.name}

    def line(self, node: NodeResult) -> str:
        """What ``node``'s step reports (its template names the step), or ""."""
        p = self.known.get(node.template) or self.known.get(node.task)
        if p is None:
            return ""
        line = p.line(time.time())
        # A fanned-out item's row shows its step's numbers: say so.
        return f"all pods: {line}" if line and node.name.endswith(")") else line


def _items(n: NodeResult) -> list[tuple[str, str]]:
    """What a node produced, as ``(label, value)``: a cache check's verdict; else its outputs
    that are not empty, less its MLflow run link (a search filter until the run exists; the
    summary's ``mlflow:`` and ``lineage:`` lines lead there); else, once it succeeded, its
    standard output. A JSON value shows by its shape: a short list whole (``["a","b"]``), a
    longer one as ``[4 items]``, an object as ``{documents=16, …}`` (its short fields, else its
    keys)."""
    from gangway.workflows.memoize import CHECK_SUFFIX
    from gangway.workflows.templates import RUN_URL_OUTPUT

    if n.outputs.get("verdict") and n.template.endswith(CHECK_SUFFIX):
        return [("cache check: ", n.outputs["verdict"])]
    shown = [
        (f"{k}=", _shape(v)) for k, v in n.outputs.items() if v.strip() and k != RUN_URL_OUTPUT
    ]
    if not shown and n.result and n.result.strip() and n.phase == "Succeeded":
        shown = [("result=", _shape(n.result))]
    return shown


_WHOLE_LIST = 24
"""The longest list (as compact JSON) the summary shows whole."""


def _shape(value: str) -> str:
    try:
        data = json.loads(value)
    except ValueError:
        return value
    if isinstance(data, list):
        whole = json.dumps(data, separators=(",", ":"))
        if len(whole) <= _WHOLE_LIST:  # a short list says more than its length
            return whole
        return f"[{len(data)} item{'' if len(data) == 1 else 's'}]"
    if isinstance(data, dict) and data:
        brief = [f"{k}={_scalar(v)}" for k, v in data.items() if _scalar(v)]
        return "{" + ", ".join(brief or data) + "}"
    return value


def _scalar(v: object) -> str:
    """A number, a flag or a short word as JSON writes it; "" for anything longer."""
    if isinstance(v, bool | int | float):
        return json.dumps(v)
    return v if isinstance(v, str) and 0 < len(v) <= 16 and "/" not in v else ""


def _seconds(s: float) -> str:
    if not s:
        return ""
    return f"{s:.1f}s" if s < 60 else f"{int(s) // 60}m{int(s) % 60:02d}s"


def progress(started: Callable[[LocalExecutor], None] | None = None) -> _LiveTable | _Lines:
    """How the run shows while it goes: the live table on a terminal, else progress lines;
    ``started`` is called once the executor starts."""
    if console.is_terminal and not console.is_dumb_terminal:
        return _LiveTable(started)
    return _Lines(started)


class _View:
    """What both views share: the hooks a run calls, the executor once it starts, warnings
    on stderr."""

    def __init__(self, started: Callable[[LocalExecutor], None] | None) -> None:
        self.started = started
        self.ex: LocalExecutor | None = None
        self.lock = threading.Lock()

    def watch(self) -> Watch:
        from gangway.local.session import Watch

        return Watch(on_event=self.event, on_start=self.start, notify=self.warn)

    def start(self, ex: LocalExecutor) -> None:
        self.ex = ex
        if self.started is not None:
            self.started(ex)

    def event(self, node: NodeResult) -> None:
        raise NotImplementedError

    @staticmethod
    def warn(message: str) -> None:
        err_console.print(f"[yellow]{message}[/]", soft_wrap=True, highlight=False)


class _LiveTable(_View):
    """The steps of the run as a live table (events come from step threads, the view from
    rich's refresher); warnings are printed above it."""

    def __init__(self, started: Callable[[LocalExecutor], None] | None = None) -> None:
        super().__init__(started)
        self.done: list[NodeResult] = []
        self.running: dict[str, NodeResult] = {}
        self.reader = RunProgress()
        self.t0 = time.monotonic()
        self.live = Live(
            get_renderable=self.view, console=console, refresh_per_second=4, transient=True
        )

    def __enter__(self) -> _LiveTable:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def start(self, ex: LocalExecutor) -> None:
        self.t0 = time.monotonic()
        super().start(ex)

    def event(self, node: NodeResult) -> None:
        with self.lock:
            if node.phase in ("Running", "Pending"):
                self.running[node.name] = node
            else:
                self.running.pop(node.name, None)
                self.done.append(node)

    def view(self) -> RenderableType:
        if self.ex is None:
            return Text("preparing the run…")
        title = f"{self.ex.name}  ({time.monotonic() - self.t0:.0f}s)"
        if self.ex.procs.stopping is not None:
            stop = signal.Signals(self.ex.procs.stopping).name
            title += f"  stopping ({stop}): Ctrl-C again kills"
        with self.lock:
            nodes = [*self.done, *self.running.values()]
        self.reader.refresh(self.ex)
        return steps_table(nodes, title, workflow=self.ex.name, progress=self.reader.line)


class _Lines(_View):
    """Progress as lines, each prefixed with the seconds since the run started; a thread
    says what is still running (``tick``) while no step starts or ends."""

    def __init__(
        self,
        started: Callable[[LocalExecutor], None] | None = None,
        *,
        out: Console = console,
        clock: Callable[[], float] = time.monotonic,
        every: float = 30.0,
    ) -> None:
        super().__init__(started)
        self.out, self.clock, self.every = out, clock, every
        self.t0 = self.said = clock()
        self.running: dict[str, tuple[float, str]] = {}
        """Each running step: when it started, the last message said of it."""
        self.steps: dict[str, str] = {}
        """Each running node's step (its template), which its metrics are labelled with."""
        self.reader = RunProgress(every=0.0)
        self.stop_said = False
        self.finished = threading.Event()
        self.ticker = threading.Thread(target=self._tick_until_done, daemon=True)

    def __enter__(self) -> _Lines:
        self.ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished.set()
        self.ticker.join()

    def _tick_until_done(self) -> None:
        while not self.finished.wait(1.0):
            self.tick()

    def start(self, ex: LocalExecutor) -> None:
        self.t0 = self.said = self.clock()
        super().start(ex)

    def event(self, node: NodeResult) -> None:
        with self.lock:
            name = self._name(node.name)
            if node.phase in ("Running", "Pending"):
                since, said = self.running.get(node.name, (self.clock(), ""))
                if node.name not in self.running:
                    self._say(f"{name}: started", node.message)
                elif node.message and node.message != said:
                    self._say(f"{name}: {node.message}")
                self.running[node.name] = (since, node.message or said)
                self.steps[node.name] = node.template
                return
            self.running.pop(node.name, None)
            status = "cached" if node.cached else node.phase
            took = f" in {_seconds(node.seconds)}" if node.seconds else ""
            head = f"{name}: {status}{took}"
            items = ", ".join(label + value for label, value in _items(node)) or node.message
            self._say(head, items)

    def tick(self) -> None:
        """Say, once, that the run is stopping; and what still runs when nothing was said
        for ``every`` seconds."""
        with self.lock:
            stopping = self.ex.procs.stopping if self.ex is not None else None
            if stopping is not None and not self.stop_said:
                self.stop_said = True
                name = signal.Signals(stopping).name
                self._say(f"stopping ({name}): steps get --grace-period; a second signal kills")
            now = self.clock()
            if self.running and now - self.said >= self.every:
                if self.ex is not None:
                    self.reader.refresh(self.ex)
                names = [
                    f"{self._name(n)} ({now - since:.0f}s{self._progress(n)})"
                    for n, (since, _) in self.running.items()
                ]
                self._say(f"still running: {', '.join(names)}")

    def _progress(self, node: str) -> str:
        """``, step 40/300 · …`` for a running step that reports progress."""
        step = self.steps.get(node)
        said = self.reader.known.get(step) if step else None
        return f", {said.line(time.time())}" if said is not None else ""

    def _name(self, node: str) -> str:
        return node.removeprefix(f"{self.ex.name}.") if self.ex is not None else node

    def _say(self, text: str, detail: str = "") -> None:
        """One line, the seconds since the start before it; ``detail`` cut to the width."""
        now = self.clock()
        line = f"{now - self.t0:>5.0f}s  {text}"
        if detail:
            line += " — " + shorten(detail, max(self.out.width - len(line) - 3, 20))
        self.out.print(line, markup=False, highlight=False, soft_wrap=True)
        self.said = now
