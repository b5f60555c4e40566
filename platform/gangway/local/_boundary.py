"""The children of one DAG or steps template at one node, as Argo admits them: the template's
own ``parallelism`` and ``failFast``.

Argo starts a child of a DAG or steps node — a pod, a nested DAG or steps, items of a fan-out
included, and the exit handlers and hooks it runs there — only while fewer than the
template's ``parallelism`` of them are Pending or Running and, with the template's
``failFast: true``, only while none of them has Failed or Errored (a failed attempt of a
retried child counts); the node then fails with :data:`FAIL_FAST` once what runs has ended.
Nothing running is stopped. Suspend and Skipped nodes do not count. (Argo:
``workflow/controller/operator.go`` ``checkParallelism``, ``workflow/controller/
node_counters.go``; ``failFast`` of the template, not ``dag.failFast``.)

Children are admitted in the order they were placed (:meth:`Boundary.place`): a DAG's ready
tasks in the DAG's order, a fan-out's items in item order, so which of them ran does not
depend on how many of the run's steps may run at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from gangway.local._results import NodeResult

__all__ = ["FAIL_FAST", "Boundary", "Budget"]

FAIL_FAST = "template has failed or errored children and failFast enabled"
"""Argo's message on a DAG or steps node that ``failFast`` stopped."""

_FAILED = ("Failed", "Error")


class Boundary:
    """One DAG or steps template running at one node: the children it lets start."""

    def __init__(self, template: Mapping[str, Any]) -> None:
        limit = int(template.get("parallelism") or 0)
        self.limit = limit if limit > 0 else None
        """At most this many children at once (None: no limit of its own)."""
        self.fail_fast = template.get("failFast") is True
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()
        self._active = 0
        self._failures = 0

    @property
    def halted(self) -> bool:
        """``failFast`` and a child has failed: no child starts any more."""
        return self.fail_fast and self._failures > 0

    def place(self) -> object:
        """A place in the order in which children are let in (taken where they are started,
        in their order; :meth:`admit` waits its turn)."""
        token = object()
        with self._cv:
            self._queue.append(token)
        return token

    def admit(
        self, start: Callable[[], NodeResult], token: object | None = None
    ) -> NodeResult | None:
        """Run ``start`` (a child) once its turn has come and fewer than ``parallelism``
        children run; None, without running it, once :attr:`halted`."""
        token = token if token is not None else self.place()
        with self._cv:
            while not self.halted and (
                self._queue[0] is not token
                or (self.limit is not None and self._active >= self.limit)
            ):
                self._cv.wait()
            self._queue.remove(token)
            go = not self.halted
            self._active += go
            self._cv.notify_all()
        if not go:
            return None
        node: NodeResult | None = None
        try:
            node = start()
            return node
        finally:
            with self._cv:
                self._active -= 1
                if node is None or node.phase in _FAILED or node.attempts > 1:
                    self._failures += 1
                self._cv.notify_all()

    def cancel(self, token: object) -> None:
        """Give up a place that will not be used (a task that turned out not to start)."""
        with self._cv:
            if token in self._queue:
                self._queue.remove(token)
                self._cv.notify_all()


class Budget:
    """A share of the machine that side-by-side work takes in units (a gang: its
    processes), first come first served; one asking for more than all of it gets all of it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()
        self._used = 0

    @contextmanager
    def held(self, units: int) -> Iterator[None]:
        units = max(1, min(units, self.capacity))
        me = object()
        with self._cv:
            self._queue.append(me)
            while self._queue[0] is not me or self._used + units > self.capacity:
                self._cv.wait()
            self._queue.popleft()
            self._used += units
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                self._used -= units
                self._cv.notify_all()
