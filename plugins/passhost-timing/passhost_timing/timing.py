"""The pass timing instrument: TVM's ``PassTimingInstrument`` for passhost.

Every pass that runs gets a profile node: ``run_before_pass`` opens it as a child of the
pass that is currently running (a Sequential's children, the ``InferType`` a function
pass runs at its end, passes named in ``required``), ``run_after_pass`` closes it.
``render()`` prints the tree in TVM's exact format, one line per pass, pre-order,
children in execution order::

    <tabs><name>: <duration>us [<self>us] (<% of all top-level passes>%; <% of parent>%)

* one tab character per nesting level; every line ends with ``\\n``;
* ``duration`` is the wall-clock time of the pass in microseconds, ``self`` the part
  not spent in nested passes (both rounded to whole microseconds);
* the first percentage is relative to the sum of the top-level passes, the second to
  the parent pass (for a top-level pass the parent is that sum, so both are equal).

For ``InferType()(mod)`` then ``FoldScaleAxis()(mod)`` under ``PassContext()``
(opt_level 2: the Sequential's two opt-level-3 passes are skipped and not recorded)::

    InferType: 8012us [8012us] (51.67%; 51.67%)
    FoldScaleAxis: 7494us [2us] (48.33%; 48.33%)
    \tFoldConstant: 7492us [1000us] (48.32%; 99.97%)
    \t\tInferType: 6492us [6492us] (41.87%; 86.65%)

Profiles accumulate until the context exits: ``exit_pass_ctx`` discards them (so call
``render()`` inside the ``with`` block; ``ctx.override_instruments([])`` clears them
too). With nothing recorded ``render()`` logs a warning on the ``passhost.timing``
logger and returns ``""``.

As in TVM the profile is per thread (contexts are per thread, so an instrument installed
in two threads' contexts keeps two separate profiles and ``render()`` shows the calling
thread's). Differences from TVM, on purpose: the profile belongs to the instrument
object, not to one thread-global store, so two timing instruments do not see each
other's passes; and a percentage whose denominator is zero prints ``0.00`` instead of
``nan``.
"""
from __future__ import annotations

import json
import logging
import threading
from time import perf_counter_ns
from typing import Any, Optional

from passhost.errors import PasshostError
from passhost.instrument import PassInstrument

__all__ = ["PassTimingInstrument", "TimingError", "render_text", "profile_tree", "FORMATS"]

_log = logging.getLogger("passhost.timing")

#: the report formats :meth:`PassTimingInstrument.render` knows
FORMATS = ("text", "json")

# A profile node is a list [name, start_ns, duration_ns, children] (lists are the
# cheapest mutable record: the hooks run around every pass).
_NAME, _START, _DUR, _KIDS = 0, 1, 2, 3


class TimingError(PasshostError):
    """The timing instrument was configured or used wrongly."""


class _Profile(threading.local):
    """One thread's profile: the closed and open top-level nodes, and the open ones."""

    def __init__(self) -> None:
        self.roots: list = []
        self.stack: list = []


def _pct(part: float, whole: float) -> float:
    return part / whole * 100.0 if whole else 0.0


def render_text(roots: list) -> str:
    """TVM's text report of the profile forest ``roots`` (closed nodes only).

    Walks the tree with an explicit stack (pre-order, children in execution order).
    """
    top = sum(node[_DUR] for node in roots) / 1000.0
    lines = []
    stack = [(0, top, node) for node in reversed(roots)]
    while stack:
        depth, parent_us, node = stack.pop()
        dur_us = node[_DUR] / 1000.0
        self_us = dur_us
        for child in reversed(node[_KIDS]):
            self_us -= child[_DUR] / 1000.0
            stack.append((depth + 1, dur_us, child))
        lines.append(f"{chr(9) * depth}{node[_NAME]}: {dur_us:.0f}us [{self_us:.0f}us] "
                     f"({_pct(dur_us, top):.2f}%; {_pct(dur_us, parent_us):.2f}%)\n")
    return "".join(lines)


def profile_tree(roots: list) -> dict:
    """The profile forest as plain data (what ``render(format="json")`` serialises)::

        {"unit": "us", "total_us": 15506.0,
         "passes": [{"name": "InferType", "duration_us": 8012.0, "self_us": 8012.0,
                     "percent_total": 51.67, "percent_parent": 51.67, "children": []}, ...]}

    Durations keep their sub-microsecond fraction; percentages are rounded to 2 places.
    """
    top = sum(node[_DUR] for node in roots) / 1000.0
    out: list = []
    stack = [(node, top, out) for node in reversed(roots)]
    while stack:
        node, parent_us, siblings = stack.pop()
        dur_us = node[_DUR] / 1000.0
        kids = node[_KIDS]
        entry = {
            "name": node[_NAME],
            "duration_us": dur_us,
            "self_us": dur_us - sum(c[_DUR] for c in kids) / 1000.0,
            "percent_total": round(_pct(dur_us, top), 2),
            "percent_parent": round(_pct(dur_us, parent_us), 2),
            "children": [],
        }
        siblings.append(entry)
        for child in reversed(kids):
            stack.append((child, dur_us, entry["children"]))
    return {"unit": "us", "total_us": top, "passes": out}


class PassTimingInstrument(PassInstrument):
    """Time every pass, nested under the pass that ran it; ``render()`` prints TVM's report.

    :param format: what :meth:`render` returns by default: ``"text"`` (TVM's format) or
        ``"json"`` (the tree of :func:`profile_tree`); ``passhost run --instrument
        'timing(format="json")'`` prints the JSON
    :raises TimingError: unknown ``format``
    """

    def __init__(self, format: str = "text") -> None:
        if format not in FORMATS:
            raise TimingError(f"timing: format must be one of {', '.join(map(repr, FORMATS))}, got {format!r}")
        self.format = format
        self._profile = _Profile()

    # -- hooks (TVM registers only these three) ------------------------------------------
    def run_before_pass(self, mod: Any, info: Any) -> None:
        node = [info.name, 0, 0, []]
        profile = self._profile
        stack = profile.stack
        (stack[-1][_KIDS] if stack else profile.roots).append(node)
        stack.append(node)
        node[_START] = perf_counter_ns()

    def run_after_pass(self, mod: Any, info: Any) -> None:
        end = perf_counter_ns()
        stack = self._profile.stack
        if not stack:  # installed while the pass was already running: nothing to close
            return
        node = stack.pop()
        if node[_NAME] != info.name:
            # the innermost open pass raised (its after hook never ran); close up to ours
            node = self._close_to(stack, info.name, end, node)
            if node is None:
                return
        node[_DUR] = end - node[_START]

    def exit_pass_ctx(self) -> None:
        profile = self._profile
        profile.roots = []
        profile.stack = []

    @staticmethod
    def _close_to(stack: list, name: str, end: int, node: list) -> Optional[list]:
        """Pop the nodes of passes that raised until the open node named ``name``."""
        abandoned = [node]
        while stack and stack[-1][_NAME] != name:
            abandoned.append(stack.pop())
        if not stack:  # no open pass of that name: leave the stack as it was
            stack.extend(reversed(abandoned))
            return None
        for dead in abandoned:
            dead[_DUR] = end - dead[_START]
        return stack.pop()

    # -- reports -----------------------------------------------------------------------------
    @property
    def running(self) -> tuple:
        """Names of the passes that started and have not finished (outermost first)."""
        return tuple(node[_NAME] for node in self._profile.stack)

    def profile(self) -> dict:
        """The recorded profile as plain data (see :func:`profile_tree`).

        :raises TimingError: a pass is still running (or raised and was never closed)
        """
        self._check_closed()
        return profile_tree(self._profile.roots)

    def render(self, format: Optional[str] = None) -> str:
        """The report: TVM's text (default) or JSON (``format="json"``).

        Returns ``""`` (and logs a warning on the ``passhost.timing`` logger) when no
        pass has been profiled since the context was entered.

        :raises TimingError: a pass is still running (or raised and was never closed),
            or ``format`` is unknown
        """
        fmt = self.format if format is None else format
        if fmt not in FORMATS:
            raise TimingError(f"timing: render format must be one of {', '.join(map(repr, FORMATS))}, "
                              f"got {fmt!r}")
        self._check_closed()
        roots = self._profile.roots
        if not roots:
            _log.warning("no passes have been profiled, did you enable pass profiling?")
            return ""
        if fmt == "json":
            return json.dumps(profile_tree(roots), indent=2) + "\n"
        return render_text(roots)

    def _check_closed(self) -> None:
        stack = self._profile.stack
        if stack:
            raise TimingError(
                f"cannot print pass profile while still in a pass! (pass {stack[-1][_NAME]!r} has "
                "started and not finished; if it raised, its profile is dropped when the PassContext exits)")
