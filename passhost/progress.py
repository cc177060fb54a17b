"""Progress of long steps -- reading a model, a pass, writing a model -- for whoever shows it.

Code doing a long step opens one with :func:`step` and advances it; ``passhost run``
watches steps and draws them on one line of a terminal (never in pipes or logs). With
nobody watching, a step costs a counter increment::

    with progress.step("export", total_bytes=size, total_items=len(weights)) as s:
        for name, arr in weights:
            write(arr)
            s.advance(arr.nbytes)

    export  12/40 tensors  1.2/3.0 GB  41 %  6 s left

:func:`advance` advances the innermost open step: a weight a pass materialises is counted
against the pass that runs (``passhost.weights`` does it for every large constant made).
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator, Optional

__all__ = ["Step", "step", "begin", "end", "advance", "watch", "current"]

_OPEN: list = []       # the open steps, innermost last
_WATCHERS: list = []   # callables (event, step): event is "start", "advance" or "end"


class Step:
    """One long step: its label, what it has done and (when known) what it will do."""

    __slots__ = ("label", "total_bytes", "total_items", "done_bytes", "done_items", "started")

    def __init__(self, label: str, total_bytes: Optional[int] = None, total_items: Optional[int] = None) -> None:
        self.label = label
        self.total_bytes = total_bytes
        self.total_items = total_items
        self.done_bytes = 0
        self.done_items = 0
        self.started = time.perf_counter()

    def advance(self, nbytes: int = 0, items: int = 1) -> None:
        """Count ``items`` more done, holding ``nbytes``."""
        self.done_bytes += nbytes
        self.done_items += items
        for watcher in _WATCHERS:
            watcher("advance", self)

    def eta(self) -> Optional[float]:
        """Seconds left, from the bytes (else the items) done so far; ``None`` when unknown."""
        elapsed = time.perf_counter() - self.started
        for done, total in ((self.done_bytes, self.total_bytes), (self.done_items, self.total_items)):
            if total and done:
                return max(0.0, elapsed * (total - done) / done)
        return None


def begin(label: str, *, total_bytes: Optional[int] = None, total_items: Optional[int] = None) -> Step:
    """Open a step (close it with :func:`end`; :func:`step` does both around a block)."""
    s = Step(label, total_bytes, total_items)
    _OPEN.append(s)
    for watcher in _WATCHERS:
        watcher("start", s)
    return s


def end(s: Step) -> None:
    """Close the step ``s``."""
    if s in _OPEN:
        _OPEN.remove(s)
        for watcher in _WATCHERS:
            watcher("end", s)


@contextlib.contextmanager
def step(label: str, *, total_bytes: Optional[int] = None, total_items: Optional[int] = None) -> Iterator[Step]:
    """Open a step for the ``with`` body; its watchers see it start, advance and end."""
    s = begin(label, total_bytes=total_bytes, total_items=total_items)
    try:
        yield s
    finally:
        end(s)


def current() -> Optional[Step]:
    """The innermost open step, or ``None``."""
    return _OPEN[-1] if _OPEN else None


def advance(nbytes: int = 0, items: int = 1) -> None:
    """Advance the innermost open step, if any."""
    if _OPEN:
        _OPEN[-1].advance(nbytes, items)


@contextlib.contextmanager
def watch(callback: Callable[[str, Step], None]) -> Iterator[None]:
    """Call ``callback(event, step)`` for every step that starts, advances or ends in the
    ``with`` body (``event``: ``"start"``, ``"advance"``, ``"end"``)."""
    _WATCHERS.append(callback)
    try:
        yield
    finally:
        _WATCHERS.remove(callback)
