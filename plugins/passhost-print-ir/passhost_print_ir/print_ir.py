"""The ``print-ir`` instrument: print (or dump to files) the IR around passes.

It merges TVM's ``PrintBeforeAll``/``PrintAfterAll``/``PassPrintingInstrument`` with
LLVM's ``-print-changed``: by default it prints the module once at the start and then
after every pass that changed it. Each dump is a header line and the module in the
text format (``#[version = "0.0.5"]``, constants as ``meta[relay.Constant][i]``)::

    Print IR at start:
    #[version = "0.0.5"]
    def @main(%x: Tensor[(2), float32]) {
      %0 = add(2f, 3f);
      multiply(%x, %0)
    }

    Print IR after: FoldConstant
    #[version = "0.0.5"]
    def @main(%x: Tensor[(2), float32] /* ty=Tensor[(2), float32] */) -> Tensor[(2), float32] {
      multiply(%x, 5f /* ty=float32 */) /* ty=Tensor[(2), float32] */
    }

With ``diff=True`` an "after" dump is a unified diff against the pass's input, as
LLVM's ``-print-changed=diff``::

    Print IR after: FoldConstant (diff)
    --- before FoldConstant
    +++ after FoldConstant
    @@ -1,5 +1,4 @@
     #[version = "0.0.5"]
    -def @main(%x: Tensor[(2), float32]) {
    -  %0 = add(2f, 3f);
    -  multiply(%x, %0)
    +def @main(%x: Tensor[(2), float32] /* ty=Tensor[(2), float32] */) -> Tensor[(2), float32] {
    +  multiply(%x, 5f /* ty=float32 */) /* ty=Tensor[(2), float32] */
     }

Change detection is cheap: a pass that returns the very same function objects did not
change the module; otherwise the functions whose identity changed are compared by
:func:`passhost.ir.structural_hash` and by their number of distinct nodes (the hash
alone cannot see two equal subexpressions merged into one). Inferred types are not
part of either, so a pass that only adds type annotations counts as unchanged.
"""
from __future__ import annotations

import difflib
import os
import sys
import threading
from typing import Any, Iterable, Optional, TextIO

from passhost.errors import PasshostError
from passhost.instrument import PassInstrument
from passhost.io import write_text_atomic
from passhost.ir import IRModule, post_order, structural_hash

__all__ = ["PrintIRInstrument", "PrintIRError", "module_changed", "ir_text", "unified_diff"]


class PrintIRError(PasshostError):
    """The print-ir instrument was configured wrongly or could not write a dump."""


def ir_text(mod: IRModule) -> str:
    """The text a dump shows for ``mod`` (ends with a newline; no metadata section)."""
    if not len(mod):
        return "#[version = \"0.0.5\"]\n"
    text = mod.astext(show_meta_data=False)
    return text if text.endswith("\n") else text + "\n"


def _snapshot(mod: IRModule) -> tuple:
    """The module's (global var, function) pairs: identities to compare later."""
    return tuple(mod.items())


def module_changed(before: tuple, after: tuple) -> bool:
    """Whether two snapshots (``tuple(mod.items())``) differ.

    Same function objects under the same names: unchanged, at no cost. Otherwise only
    the functions whose identity differs are compared, by :func:`structural_hash` and
    by their number of distinct nodes (so merging equal subexpressions is a change).
    """
    if len(before) != len(after):
        return True
    old = {gv.name_hint: f for gv, f in before}
    for gv, f in after:
        g = old.get(gv.name_hint)
        if g is None:
            return True
        if g is not f and _fingerprint(g) != _fingerprint(f):
            return True
    return False


def _fingerprint(func: Any) -> tuple:
    """Structure and sharing of a function: the structural hash sees ``add(%1, %1)`` and
    ``add(%1, %2)`` with equal ``%1``/``%2`` alike (as TVM's does), so the number of
    distinct nodes is compared too; that is what EliminateCommonSubexpr changes."""
    return structural_hash(func), len(post_order(func))


def unified_diff(before: str, after: str, name: str) -> str:
    """A unified diff of two module texts (``--- before NAME`` / ``+++ after NAME``)."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(),
                                 fromfile=f"before {name}", tofile=f"after {name}", lineterm="")
    return "".join(line + "\n" for line in lines)


def _safe(name: str) -> str:
    """A pass name usable in a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "pass"


class _PerThread(threading.local):
    """A thread's running passes and text cache (pass contexts are per thread)."""

    def __init__(self) -> None:
        self.inputs: list = []  # (pass name, input snapshot, input text or None) of running passes
        self.finished = 0  # passes finished so far: a pass may type shared nodes in place
        self.cache: tuple = ((), -1, "")  # (snapshot, finished, text) of the last text made


class PrintIRInstrument(PassInstrument):
    """Print the module before and/or after passes (by default: after each change).

    :param before: print each pass's input module (``Print IR before: NAME``)
    :param after: print each pass's output module (``Print IR after: NAME``)
    :param passes: only these pass names (a list/tuple of names; ``None``: every pass)
    :param only_changed: print an "after" dump only when the pass changed the module,
        and print the module once at the start (``Print IR at start:``)
    :param diff: show an "after" dump as a unified diff against the pass's input
    :param dump_dir: write every dump to its own file in this directory, numbered in
        order (``003-FoldConstant-after.txt``, ``000-start.txt``), atomically, instead of
        printing; the directory is created if needed
    :param file: (Python only) the stream to print to; default ``sys.stderr``
    :raises PrintIRError: a badly typed option
    """

    def __init__(self, before: bool = False, after: bool = True, passes: Optional[Iterable[str]] = None,
                 only_changed: bool = True, diff: bool = False, dump_dir: Optional[str] = None,
                 file: Optional[TextIO] = None) -> None:
        for key, value in (("before", before), ("after", after), ("only_changed", only_changed),
                           ("diff", diff)):
            if not isinstance(value, bool):
                raise PrintIRError(f"print-ir: {key} must be True or False, got {value!r}")
        if passes is not None:
            if isinstance(passes, str) or not isinstance(passes, (list, tuple, set, frozenset)):
                raise PrintIRError(f"print-ir: passes must be a list of pass names, got {passes!r} "
                                   "(e.g. passes=[\"FoldConstant\"])")
            if not all(isinstance(p, str) for p in passes):
                raise PrintIRError(f"print-ir: passes holds pass names (strings), got {list(passes)!r}")
            passes = frozenset(passes)
        if dump_dir is not None and not isinstance(dump_dir, (str, os.PathLike)):
            raise PrintIRError(f"print-ir: dump_dir must be a directory path, got {dump_dir!r}")
        self.before = before
        self.after = after
        self.passes = passes
        self.only_changed = only_changed
        self.diff = diff
        self.dump_dir = None if dump_dir is None else os.fspath(dump_dir)
        self.file = file
        #: the dumps written to ``dump_dir`` in this context, in order
        self.files: list = []
        self._local = _PerThread()
        self._lock = threading.Lock()  # dump numbers are unique across threads
        self._count = 0
        self._started = False
        self._active = 0  # contexts (in any thread) this instrument is entered in

    # -- hooks -----------------------------------------------------------------------------
    def enter_pass_ctx(self) -> None:
        self._local.inputs = []
        self._local.cache = ((), -1, "")
        with self._lock:
            if not self._active:  # numbering restarts unless another thread is still dumping
                self._count = 0
                self._started = False
                self.files = []
            self._active += 1
        if self.dump_dir is not None:
            try:
                os.makedirs(self.dump_dir, exist_ok=True)
            except OSError as err:
                self.exit_pass_ctx()
                raise PrintIRError(f"print-ir: cannot create dump_dir {self.dump_dir!r}: "
                                   f"{err.strerror or err}; choose a writable directory") from None

    def exit_pass_ctx(self) -> None:
        self._local.inputs = []
        self._local.cache = ((), -1, "")
        with self._lock:
            self._active = max(self._active - 1, 0)

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        name = info.name
        selected = self.passes is None or name in self.passes
        if self.after and self.only_changed and not self._started:
            self._started = True
            self._emit("Print IR at start:", "start", mod, _snapshot(mod))
        if not selected:
            return
        snap = _snapshot(mod) if self.after else None
        if self.before:
            self._emit(f"Print IR before: {name}", f"{_safe(name)}-before", mod, snap or _snapshot(mod))
        if self.after:
            # the diff needs the input as it prints now: the pass may add types in place
            self._local.inputs.append((name, snap, self._text(mod, snap) if self.diff else None))

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self._local.finished += 1
        if not self.after or not (self.passes is None or info.name in self.passes):
            return
        entry = self._pop(info.name)
        if entry is None:  # installed while the pass was running
            return
        _, old_snap, old_text = entry
        snap = _snapshot(mod)
        if self.only_changed and not module_changed(old_snap, snap):
            return
        name = info.name
        label = f"{_safe(name)}-after"
        if self.diff:
            body = unified_diff(old_text, self._text(mod, snap), name)
            self._write(f"Print IR after: {name} (diff)", label, body or "(no textual change)\n")
        else:
            self._emit(f"Print IR after: {name}", label, mod, snap)

    # -- helpers ---------------------------------------------------------------------------
    def _pop(self, name: str) -> Optional[tuple]:
        """Pop the input recorded for pass ``name`` (dropping passes that raised)."""
        inputs = self._local.inputs
        for i in range(len(inputs) - 1, -1, -1):
            if inputs[i][0] == name:
                entry = inputs[i]
                del inputs[i:]
                return entry
        return None

    def _text(self, mod: IRModule, snap: tuple) -> str:
        """``ir_text(mod)``, reused while the module is the same objects and no pass has
        finished since (a finished pass may have typed shared nodes in place)."""
        local = self._local
        cached_snap, finished, cached_text = local.cache
        if finished == local.finished and cached_snap and len(cached_snap) == len(snap) and all(
                a[0] is b[0] and a[1] is b[1] for a, b in zip(cached_snap, snap)):
            return cached_text
        text = ir_text(mod)
        local.cache = (snap, local.finished, text)
        return text

    def _emit(self, header: str, label: str, mod: IRModule, snap: tuple) -> None:
        self._write(header, label, self._text(mod, snap))

    def _write(self, header: str, label: str, body: str) -> None:
        with self._lock:
            number = self._count
            self._count += 1
        if self.dump_dir is None:
            out = sys.stderr if self.file is None else self.file
            out.write(f"{header}\n{body}\n")
            out.flush()
            return
        path = os.path.join(self.dump_dir, f"{number:03d}-{label}.txt")
        try:
            os.makedirs(self.dump_dir, exist_ok=True)
            write_text_atomic(path, f"{header}\n{body}", fsync=False)
        except OSError as err:
            raise PrintIRError(f"print-ir: cannot write {path!r}: {err.strerror or err}; "
                               "choose a writable dump_dir") from None
        self.files.append(path)
