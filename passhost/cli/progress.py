"""Progress on a terminal: ``passhost run`` shows what it is doing on one line of stderr
that each step overwrites, when stderr is a terminal (never in pipes or logs): the pass
that runs, with the weights it has made so far, and the long steps of reading and
writing a model (:mod:`passhost.progress`), with bytes and tensors done and, once a step
has taken a few seconds, the time left::

    [4/13] FoldScaleAxis  (2.31 s)  12 weights 1.2 GB
    export  12/40 tensors  1.2/3.0 GB  41 %  6 s left
"""
from __future__ import annotations

import time
from typing import Any, Optional, TextIO

from .. import progress
from ..instrument import PassInstrument

__all__ = ["Progress", "describe", "human_bytes"]

#: seconds between two drawings of a step that advances
_REDRAW = 0.1
#: a step shows its time left once it has run this long
_ETA_AFTER = 2.0


def human_bytes(n: float) -> str:
    """``1.2 GB``, ``340 MB``, ``12 kB``, ``512 B`` (powers of 1000)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def describe(s: progress.Step, now: Optional[float] = None) -> str:
    """One line for step ``s``: its label, tensors and bytes done (of how many), percent
    and time left when known."""
    now = time.perf_counter() if now is None else now
    parts = [s.label]
    if s.total_items:
        parts.append(f"{s.done_items}/{s.total_items} tensors")
    elif s.done_items:
        parts.append(f"{s.done_items} weights")
    if s.total_bytes:
        parts.append(f"{human_bytes(s.done_bytes)}/{human_bytes(s.total_bytes)}  "
                     f"{100 * s.done_bytes // s.total_bytes} %")
    elif s.done_bytes:
        parts.append(human_bytes(s.done_bytes))
    eta = s.eta()
    if eta is not None and now - s.started >= _ETA_AFTER and (s.total_bytes or s.total_items):
        parts.append(f"{eta:.0f} s left")
    return "  ".join(parts)


_OPENING = progress.Step("")


class Progress(PassInstrument):
    """Writes ``[i/n] PassName (elapsed)`` for each top-level pass (with the weights it has
    made), and each :mod:`passhost.progress` step it watches (:meth:`on_step`), then
    clears the line."""

    def __init__(self, stream: TextIO, total: Any) -> None:
        self.stream = stream
        #: the pipeline's pass names in order (a count will do): the type inference the
        #: pipeline runs between them is shown, and not counted
        self.names = list(total) if not isinstance(total, int) else []
        self.total = max(len(self.names) if self.names else total, 1)
        self.depth = 0
        self.done = 0
        self.start = time.perf_counter()
        self.width = 0
        self.drawn = 0.0
        self.pass_step: Optional[progress.Step] = None

    def _write(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)
        self.drawn = time.perf_counter()

    def _clear(self) -> None:
        if self.width:
            self._write("")
            self.stream.write("\r")
            self.stream.flush()
            self.width = 0

    def _pass_line(self, s: progress.Step) -> str:
        line = f"{s.label}  ({time.perf_counter() - self.start:.2f} s)"
        if s.done_items:
            line += f"  {s.done_items} weights {human_bytes(s.done_bytes)}"
        return line

    def _top(self) -> bool:
        return self.depth == 2 or self.total == 1  # the default pipeline is one Sequential of passes

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.depth += 1
        if self._top():
            self.pass_step = _OPENING  # (its own "start" is drawn here, as a pass)
            self.pass_step = progress.begin(f"[{min(self.done + 1, self.total)}/{self.total}] {info.name}")
            self._write(self._pass_line(self.pass_step))

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if self._top():
            if not self.names or (self.done < len(self.names) and self.names[self.done] == info.name):
                self.done += 1
            if self.pass_step is not None:
                progress.end(self.pass_step)
                self.pass_step = None
        self.depth -= 1

    def on_step(self, event: str, s: progress.Step) -> None:
        """The :func:`passhost.progress.watch` callback: draw ``s`` (at most every 0.1 s
        while it advances); a step that ends clears its line."""
        if s is self.pass_step or self.pass_step is _OPENING:
            if event == "advance" and time.perf_counter() - self.drawn >= _REDRAW:
                self._write(self._pass_line(s))
            return
        if event == "end":
            self._clear()
        elif event == "start" or time.perf_counter() - self.drawn >= _REDRAW:
            self._write(describe(s))

    def exit_pass_ctx(self) -> None:
        self._clear()
