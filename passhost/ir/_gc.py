"""Pause Python's cyclic garbage collector around bulk graph work.

IR nodes form DAGs (never cycles), yet every node is a GC-tracked container, so
building or walking a million-node graph triggers many full collections that
scan the whole graph again and again — about half of the run time. Host entry
points that touch whole graphs run under :func:`gc_paused`; the collector is
restored (and runs normally) as soon as the outermost paused region ends.
"""
from __future__ import annotations

import functools
import gc
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

__all__ = ["gc_paused", "paused"]

F = TypeVar("F", bound=Callable)

_depth = 0


@contextmanager
def paused() -> Iterator[None]:
    """Context manager: disable the cyclic GC inside, restore it on exit (re-entrant)."""
    global _depth
    if _depth == 0 and not gc.isenabled():
        # the user disabled GC themselves: leave it alone
        yield
        return
    _depth += 1
    if _depth == 1:
        gc.disable()
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.enable()


def gc_paused(fn: F) -> F:
    """Decorator form of :func:`paused`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _depth
        if _depth or not gc.isenabled():
            return fn(*args, **kwargs)
        _depth = 1
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            _depth = 0
            gc.enable()

    return wrapper  # type: ignore[return-value]
