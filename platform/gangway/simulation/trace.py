"""A GPU-cluster trace as published (Alibaba cluster-trace-gpu-v2023, "openb"): the node list
and a pod list, read from CSV with every mistake reported by file, line and column."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gangway.errors import PermanentError
from gangway.packing import MILLI, Shape

if TYPE_CHECKING:
    from gangway.snapshot.model import ClusterState

__all__ = ["MILLI", "TraceNode", "TracePod", "nodes_of", "read_nodes", "read_pods"]

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

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @cached_property
    def shape(self) -> Shape:
        """The request as :mod:`gangway.packing` reads it (CPU millicores, memory MiB)."""
        return Shape(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.models)


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise PermanentError(f"{path}: cannot read it: {e.strerror or e}") from None
    with handle:
        try:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise PermanentError(
                    f"{path}:1: missing column(s) {', '.join(missing)} "
                    f"(has {', '.join(header) or 'none'})"
                )
            for row in reader:
                yield reader.line_num, row
        except UnicodeDecodeError as e:
            raise PermanentError(f"{path}: not UTF-8 text ({e.reason})") from None
        except csv.Error as e:
            raise PermanentError(f"{path}: not CSV: {e}") from None


def _number(path: Path, line: int, row: dict[str, str], column: str, low: int, high: int) -> int:
    raw = (row.get(column) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise PermanentError(
            f"{path}:{line}: column {column}: {raw!r} is not a whole number"
        ) from None
    if not low <= value <= high:
        raise PermanentError(f"{path}:{line}: column {column}: {value} is not in {low}..{high}")
    return value


T = TypeVar("T")


def _read(
    path: Path, required: tuple[str, ...], make: Callable[[int, dict[str, str]], T]
) -> list[T]:
    out = [make(line, row) for line, row in _rows(path, required)]
    if not out:
        raise PermanentError(f"{path}: no rows after the header")
    return out


def read_nodes(path: Path) -> list[TraceNode]:
    """The node list: ``sn, cpu_milli, memory_mib, gpu, model``."""

    def node(line: int, row: dict[str, str]) -> TraceNode:
        gpus = _number(path, line, row, "gpu", 0, MAX_GPUS_PER_NODE)
        model = (row.get("model") or "").strip()
        if gpus and not model:
            raise PermanentError(f"{path}:{line}: column model: empty for a node with GPUs")
        return TraceNode(
            name=(row.get("sn") or "").strip() or f"line-{line}",
            cpu_milli=_number(path, line, row, "cpu_milli", 0, 10**9),
            memory_mib=_number(path, line, row, "memory_mib", 0, 10**12),
            gpus=gpus,
            model=model,
        )

    return _read(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"), node)


def read_pods(path: Path) -> list[TracePod]:
    """A pod list: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and, when present,
    ``gpu_spec`` (``|``-separated GPU models). Other columns are ignored, as the method does."""

    def pod(line: int, row: dict[str, str]) -> TracePod:
        num_gpu = _number(path, line, row, "num_gpu", 0, MAX_GPUS_PER_NODE)
        milli = _number(path, line, row, "gpu_milli", 0, 10**6)
        if num_gpu and milli == 0:
            raise PermanentError(f"{path}:{line}: column gpu_milli: 0 for a pod with GPUs")
        spec = (row.get("gpu_spec") or "").strip()
        return TracePod(
            name=(row.get("name") or "").strip() or f"line-{line}",
            cpu_milli=_number(path, line, row, "cpu_milli", 0, 10**9),
            memory_mib=_number(path, line, row, "memory_mib", 0, 10**12),
            num_gpu=num_gpu,
            gpu_milli=min(milli, MILLI) if num_gpu else 0,
            models=frozenset(m for m in spec.split("|") if m) if spec else frozenset(),
        )

    required = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
    return _read(path, required, pod)


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
