"""The ``op-diff`` instrument: how many calls of each operator every pass added or removed.

This is the ``RelayCallNodeDiffer`` of TVM's pass-instrument tutorial: before a pass it
counts the calls of each operator in ``mod["main"]``, after the pass it counts again and
records ``(depth, pass name, {op name: after - before})`` for the passes that changed a
count. Passes nest (a Sequential's children, the ``InferType`` at the end of a function
pass), so the "before" counts live on a stack and ``depth`` is the nesting level; the
list is in completion order, children before the pass that contains them.

For ResNet-18 with its parameters bound, ``Sequential([SimplifyInference(),
FoldConstant()])`` at opt_level 3 gives (``get_pass_to_op_diff()``, pretty-printed)::

    [(1, 'SimplifyInference', {'add': 57, 'divide': 19, 'expand_dims': 38, 'multiply': 56,
                               'negative': 19, 'nn.batch_norm': -19, 'sqrt': 19}),
     (1, 'FoldConstant', {'add': -38, 'divide': -19, 'expand_dims': -38, 'multiply': -37,
                          'negative': -19, 'sqrt': -19}),
     (0, 'sequential', {'add': 19, 'multiply': 19, 'nn.batch_norm': -19})]

so the pipeline as a whole turned each of the 19 batch norms into one multiply and one
add (the dictionaries' key order is that of the tutorial's ``_diff``).

and ``render()`` (what ``passhost run --instrument op-diff`` prints to stderr) shows
the same as a table, one line per pass and operator.

Counting uses :func:`passhost.ir.count_ops` (explicit stack, each shared node once, as
TVM's ``post_order_visit``) and is cached by function identity, so the count after one
pass is reused as the count before the next.
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from passhost.errors import PasshostError
from passhost.instrument import PassInstrument
from passhost.ir import IRModule, count_ops

__all__ = ["RelayCallNodeDiffer", "OpDiffError", "count_module_ops", "op_count_diff", "render_table"]


class OpDiffError(PasshostError):
    """The op-diff instrument was configured wrongly."""


def count_module_ops(mod: IRModule, all_functions: bool = False) -> dict:
    """``{op name: number of calls}`` in ``mod["main"]`` (as the tutorial counts), or in
    every function of ``mod`` when ``all_functions`` is true or there is no ``main``."""
    if not all_functions and "main" in mod:
        return count_ops(mod["main"])
    total: dict = {}
    for _, func in mod.items():
        for op, n in count_ops(func).items():
            total[op] = total.get(op, 0) + n
    return total


def op_count_diff(after: dict, before: dict) -> dict:
    """``after - before`` per operator, keeping only non-zero differences (the
    tutorial's ``_diff``: common keys first, then new operators, then vanished ones)."""
    ret = {}
    for k in before.keys() & after.keys():
        delta = after[k] - before[k]
        if delta:
            ret[k] = delta
    for k in after.keys() - before.keys():
        ret[k] = after[k]
    for k in before.keys() - after.keys():
        ret[k] = -before[k]
    return ret


def render_table(diffs: list) -> str:
    """A table of ``[(depth, pass, {op: delta})]``: one row per pass and operator
    (operators sorted), the pass indented two spaces per depth, in completion order."""
    if not diffs:
        return "op-diff: no pass changed an operator count\n"
    rows = [("PASS", "OPERATOR", "DELTA")]
    for depth, name, diff in diffs:
        label = "  " * depth + name
        for i, op in enumerate(sorted(diff)):
            rows.append((label if i == 0 else "", op, f"{diff[op]:+d}"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    return "".join(f"{a.ljust(w0)}  {b.ljust(w1)}  {c.rjust(w2)}".rstrip() + "\n" for a, b, c in rows)


class _PerThread(threading.local):
    """A thread's open passes and its last count (pass contexts are per thread)."""

    def __init__(self) -> None:
        # Passes can be nested: a stack pairs each after with its before.
        self.stack: list = []
        self.cache: tuple = ((), {})  # (snapshot of the functions counted, their counts)


class RelayCallNodeDiffer(PassInstrument):
    """Record, per pass, the change in the number of calls of each operator.

    :param all_functions: count calls in every function of the module instead of only
        ``main`` (the tutorial counts ``main``; a module without ``main`` is always
        counted whole)
    :raises OpDiffError: ``all_functions`` is not a bool
    """

    def __init__(self, all_functions: bool = False) -> None:
        if not isinstance(all_functions, bool):
            raise OpDiffError(f"op-diff: all_functions must be True or False, got {all_functions!r}")
        self.all_functions = all_functions
        self._op_diff: list = []
        self._local = _PerThread()

    def enter_pass_ctx(self) -> None:
        self._op_diff = []
        self._local.stack = []

    def exit_pass_ctx(self) -> None:
        # The tutorial asserts the stack is empty; a pass that raised leaves its entry,
        # and asserting here would hide that pass's exception, so just drop it.
        self._local.stack = []
        self._local.cache = ((), {})

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self._local.stack.append((info.name, self._count(mod)))

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        entry = self._pop(info.name)
        if entry is None:  # installed while this pass was running
            return
        cur_depth = len(self._local.stack)
        op_diff = op_count_diff(self._count(mod), entry[1])
        # only record passes causing differences
        if op_diff:
            self._op_diff.append((cur_depth, info.name, op_diff))

    def get_pass_to_op_diff(self) -> list:
        """``[(depth, pass_name, {op_name: diff_num, ...}), ...]`` in completion order."""
        return self._op_diff

    def render(self) -> str:
        """The recorded differences as a table (see :func:`render_table`)."""
        return render_table(self._op_diff)

    # -- helpers ---------------------------------------------------------------------------
    def _pop(self, name: str) -> Optional[tuple]:
        stack = self._local.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] == name:  # entries above it belong to passes that raised
                entry = stack[i]
                del stack[i:]
                return entry
        return None

    def _count(self, mod: IRModule) -> dict:
        if not self.all_functions and "main" in mod:
            snap: tuple = (mod["main"],)
        else:
            snap = tuple(f for _, f in mod.items())
        old, counts = self._local.cache
        if len(old) == len(snap) and old and all(a is b for a, b in zip(old, snap)):
            return counts
        counts = count_module_ops(mod, self.all_functions)
        self._local.cache = (snap, counts)
        return counts
