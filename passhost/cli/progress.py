"""Progress on a terminal: ``passhost run`` shows which pass is running, on one line of
stderr that each pass overwrites, when stderr is a terminal (never in pipes or logs)::

    [4/6] EliminateCommonSubexpr  (2.31 s)
"""
from __future__ import annotations

import time
from typing import Any, TextIO

from ..instrument import PassInstrument

__all__ = ["Progress"]


class Progress(PassInstrument):
    """Writes ``[i/n] PassName (elapsed)`` for each top-level pass, then clears the line."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.depth = 0
        self.done = 0
        self.start = time.perf_counter()
        self.width = 0

    def _write(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.depth += 1
        if self.depth == 2 or self.total == 1:  # the default pipeline is one Sequential of passes
            elapsed = time.perf_counter() - self.start
            self._write(f"[{min(self.done + 1, self.total)}/{self.total}] {info.name}  ({elapsed:.2f} s)")

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if self.depth == 2 or self.total == 1:
            self.done += 1
        self.depth -= 1

    def exit_pass_ctx(self) -> None:
        if self.width:
            self._write("")
            self.stream.write("\r")
            self.stream.flush()
