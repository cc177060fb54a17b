"""Pause Python's cyclic garbage collector around bulk graph work.

IR nodes form DAGs (never cycles), yet every node is a GC-tracked container, so
building or walking a million-node graph triggers many full collections that
scan the whole graph again and again — about half of the run time. Host entry
points that touch whole graphs run under :func:`gc_paused`; the collector is
restored (and runs normally) as soon as the outermost paused region ends, with the
region's survivors promoted when it built a large graph (:func:`resume`). Calling a
pass pauses it the same way for the whole pass (``passhost._passes.Pass.__call__``).
"""
from __future__ import annotations

import functools
import gc
from contextlib import ContextDecorator
from typing import Callable, TypeVar

__all__ = ["gc_paused", "paused", "resume", "in_region", "at_region_end", "PROMOTE_AFTER"]

F = TypeVar("F", bound=Callable)

_depth = 0

#: what runs when the outermost paused region ends (see at_region_end)
_AT_END: list = []

#: tracked allocations during a paused region above which its survivors are promoted
#: straight to the oldest generation when the collector resumes (see resume)
PROMOTE_AFTER = 100_000


def resume() -> None:
    """Re-enable the cyclic collector at the end of a paused region.

    A region that built a large graph leaves millions of new objects in the youngest
    generation; the first allocation after re-enabling would make the collector
    traverse them all (about 0.7 s per million nodes) to find cycles IR graphs never
    have. When the region allocated more than :data:`PROMOTE_AFTER` tracked objects and
    nobody froze objects (``gc.get_freeze_count() == 0``), the survivors are moved to
    the oldest generation instead (``gc.freeze(); gc.unfreeze()``): they are traversed
    only by the next full collection, as long-lived objects are. Cyclic garbage made
    during the region is then freed by that full collection rather than a young one.
    """
    for fn in _AT_END:
        fn()
    if gc.get_count()[0] > PROMOTE_AFTER and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    gc.enable()


def in_region() -> bool:
    """Whether the collector is paused: a pass call (a pipeline) or a whole-graph host
    function is running -- or the user turned the collector off, in which case no region
    ever ends."""
    return not gc.isenabled()


def at_region_end(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn()`` whenever the outermost paused region ends (the outermost pass call
    returns, or the outermost whole-graph host function), before the collector resumes:
    how memos that live for one pass call or one pipeline are dropped. Returns ``fn``."""
    _AT_END.append(fn)
    return fn


class paused(ContextDecorator):
    """Context manager: disable the cyclic GC inside, restore it on exit (re-entrant).
    Like a ``@contextmanager`` one, it also decorates a function (``@paused()``).

    A class rather than a generator: it is entered once per expression typed on its own
    (importers type every node they build), where a generator's frame costs as much as
    the rest of the call."""

    __slots__ = ("_active",)

    def _recreate_cm(self) -> "paused":
        return paused()  # a decorated function entered again (recursively) gets its own state

    def __enter__(self) -> None:
        global _depth
        if _depth == 0 and not gc.isenabled():
            # the user disabled GC themselves: leave it alone
            self._active = False
            return
        self._active = True
        _depth += 1
        if _depth == 1:
            gc.disable()

    def __exit__(self, *exc) -> None:
        global _depth
        if self._active:
            _depth -= 1
            if _depth == 0:
                resume()


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
            resume()

    return wrapper  # type: ignore[return-value]
