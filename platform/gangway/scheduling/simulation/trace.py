"""A GPU-cluster trace as published (Alibaba cluster-trace-gpu-v2023, "openb"): the node list
and a pod list, read from CSV with every mistake reported by file, line and column."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from gangway.errors import PermanentError, closest
from gangway.scheduling.packing import MILLI, Shape

if TYPE_CHECKING:
    from gangway.scheduling.snapshot.cluster_state import ClusterState

__all__ = [
    "MILLI",
    "TraceNode",
    "TracePod",
    "never_fit",
    "nodes_of",
    "read_csv",
    "read_nodes",
    "read_pods",
    "unique_name",
    "whole_number",
]

MAX_GPUS_PER_NODE = 64


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    """Per GPU, capped at 1000; 0 for a pod without GPUs (its ``gpu_milli`` is ignored)."""
    models: frozenset[str]
    """Allowed GPU models (``gpu_spec``); empty: any."""
    line: int = field(default=0, compare=False)
    """Where it is in its file (for messages)."""

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @cached_property
    def shape(self) -> Shape:
        """The request as :mod:`gangway.scheduling.packing` reads it (CPU millicores, memory
        MiB)."""
        return Shape(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.models)


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as e:
        raise PermanentError(f"{path}: cannot read it: {e.strerror or e}") from None
    with handle:
        try:
            reader = csv.reader(handle)
            header = [h.strip() for h in next(reader, [])]
            _check_header(path, header, required)
            for fields in reader:
                if not any(f.strip() for f in fields):
                    continue  # a blank line
                if len(fields) > len(header):
                    raise PermanentError(
                        f"{path}:{reader.line_num}: {len(fields)} fields but the header has "
                        f"{len(header)}; quote values that hold a comma"
                    )
                yield reader.line_num, dict(zip(header, fields, strict=False))
        except UnicodeDecodeError as e:
            raise PermanentError(
                f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8"
            ) from None
        except csv.Error as e:
            raise PermanentError(f"{path}: not CSV: {e}") from None


def _check_header(path: Path, header: list[str], required: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for column, name in enumerate(header, 1):
        if name and name in seen:
            raise PermanentError(f"{path}:1: column {column}: {name!r} appears twice in the header")
        seen.add(name)
    missing = [c for c in required if c not in seen]
    if missing:
        raise PermanentError(
            f"{path}:1: missing column(s) {', '.join(missing)} "
            f"(has {', '.join(h for h in header if h) or 'none'})"
        )


_WHOLE = re.compile(r"-?[0-9]+")


def whole_number(
    path: Path, line: int, row: dict[str, str], column: str, low: int, high: int
) -> int:
    """Column ``column`` of ``row`` as a whole number in ``low..high`` (ASCII digits only)."""
    raw = (row.get(column) or "").strip()
    if not _WHOLE.fullmatch(raw):
        raise PermanentError(f"{path}:{line}: column {column}: {raw!r} is not a whole number")
    value = int(raw)
    if not low <= value <= high:
        raise PermanentError(f"{path}:{line}: column {column}: {value} is not in {low}..{high}")
    return value


def unique_name(
    path: Path, line: int, row: dict[str, str], column: str, seen: dict[str, int]
) -> str:
    """Column ``column`` as a name no earlier row had (``seen``: name → line); blank:
    ``line-N``."""
    name = (row.get(column) or "").strip() or f"line-{line}"
    if name in seen:
        raise PermanentError(
            f"{path}:{line}: column {column}: {name!r} again (first on line {seen[name]}); "
            "names must be unique"
        )
    seen[name] = line
    return name


T = TypeVar("T")


def read_csv(
    path: Path, required: tuple[str, ...], make: Callable[[int, dict[str, str]], T]
) -> list[T]:
    """Every non-blank row of ``path`` (strict UTF-8 CSV with ``required`` columns) made into
    a ``T`` by ``make(line, row)``; a mistake is one line naming the file, line and column."""
    out = [make(line, row) for line, row in _rows(path, required)]
    if not out:
        raise PermanentError(f"{path}: no rows after the header")
    return out


def read_nodes(path: Path) -> list[TraceNode]:
    """The node list: ``sn, cpu_milli, memory_mib, gpu, model``."""

    seen: dict[str, int] = {}

    def node(line: int, row: dict[str, str]) -> TraceNode:
        gpus = whole_number(path, line, row, "gpu", 0, MAX_GPUS_PER_NODE)
        model = (row.get("model") or "").strip()
        if gpus and not model:
            raise PermanentError(f"{path}:{line}: column model: empty for a node with GPUs")
        return TraceNode(
            name=unique_name(path, line, row, "sn", seen),
            cpu_milli=whole_number(path, line, row, "cpu_milli", 0, 10**9),
            memory_mib=whole_number(path, line, row, "memory_mib", 0, 10**12),
            gpus=gpus,
            model=model,
        )

    return read_csv(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"), node)


def read_pods(path: Path) -> list[TracePod]:
    """A pod list: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, when present,
    ``gpu_spec`` (``|``-separated GPU models). Other columns are ignored, as the method does."""

    seen: dict[str, int] = {}

    def pod(line: int, row: dict[str, str]) -> TracePod:
        num_gpu = whole_number(path, line, row, "num_gpu", 0, MAX_GPUS_PER_NODE)
        milli = whole_number(path, line, row, "gpu_milli", 0, 10**6)
        if num_gpu and milli == 0:
            raise PermanentError(f"{path}:{line}: column gpu_milli: 0 for a pod with GPUs")
        spec = [m.strip() for m in (row.get("gpu_spec") or "").split("|")]
        return TracePod(
            name=unique_name(path, line, row, "name", seen),
            cpu_milli=whole_number(path, line, row, "cpu_milli", 0, 10**9),
            memory_mib=whole_number(path, line, row, "memory_mib", 0, 10**12),
            num_gpu=num_gpu,
            gpu_milli=min(milli, MILLI) if num_gpu else 0,
            models=frozenset(m for m in spec if m),
            line=line,
        )

    required = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
    return read_csv(path, required, pod)


def nodes_of(cluster: ClusterState) -> list[TraceNode]:
    """A snapshot cluster's schedulable nodes as a node list, empty (their allocatable):
    CPU in millicores, memory in MiB, the GPU model by the config's name for it."""
    return [
        TraceNode(
            name=n.name,
            cpu_milli=n.allocatable.cpu,
            memory_mib=n.allocatable.memory // 2**20,
            gpus=n.allocatable.gpus,
            model=n.gpu_type or "",
        )
        for n in cluster.nodes
        if n.schedulable
    ]


def never_fit(nodes: Sequence[TraceNode], pods: Sequence[TracePod]) -> list[tuple[TracePod, str]]:
    """The pods no node could take even when empty, each with the column and why — e.g. a
    ``gpu_spec`` naming a model no node has, or more GPUs than any node of its models."""
    table = _NodeTable(nodes)
    verdicts: dict[Shape, str | None] = {}
    out = []
    for pod in pods:
        if pod.shape not in verdicts:
            verdicts[pod.shape] = table.why_not(pod)
        why = verdicts[pod.shape]
        if why is not None:
            out.append((pod, why))
    return out


class _NodeTable:
    """The node list as columns, to test a pod shape against every node at once."""

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        self.models = sorted({n.model for n in nodes if n.gpus})
        self.cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpus = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.model = np.array([n.model for n in nodes], dtype=object)

    def why_not(self, pod: TracePod) -> str | None:
        """None if some empty node takes ``pod``; else the column at fault and why."""
        eligible = np.ones(len(self.cpu), dtype=bool)
        if pod.num_gpu:
            eligible &= self.gpus > 0
            if pod.models:
                eligible &= np.isin(self.model, sorted(pod.models))
        fits = eligible & (self.cpu >= pod.cpu_milli) & (self.memory >= pod.memory_mib)
        if (fits & (self.gpus >= pod.num_gpu)).any():
            return None
        if pod.num_gpu and pod.models and not pod.models & set(self.models):
            spec = "|".join(sorted(pod.models))
            near = [m for m in (closest(m, self.models) for m in sorted(pod.models)) if m]
            hint = f"; did you mean {'|'.join(near)}?" if near else ""
            known = ", ".join(self.models)
            return f"gpu_spec: {spec!r} names no node's model (they are {known}){hint}"
        of = f" of model {'|'.join(sorted(pod.models))}" if pod.num_gpu and pod.models else ""
        for column, want, have in (
            ("num_gpu", pod.num_gpu, self.gpus),
            ("cpu_milli", pod.cpu_milli, self.cpu),
            ("memory_mib", pod.memory_mib, self.memory),
        ):
            most = int(have[eligible].max()) if eligible.any() else 0
            if want > most:
                return f"{column}: {want}, but the most on any node{of} is {most}"
        return f"no node{of} has its CPU, memory and GPUs together"
