"""RemoveUnusedFunctions: drop the global functions no entry function can reach.

TVM's ``relay.transform.RemoveUnusedFunctions`` (``src/relay/backend/vm/removed_unused_funcs.cc``).
Starting from the entry functions (default ``["main"]``), every global variable
mentioned in a reached function -- called or passed as a value -- is reached too; the
functions never reached are removed. Each function body is walked once with an
explicit stack.

Before::

    def @main(%x: Tensor[(3), float32]) {
      @f(%x)
    }

    def @f(%y: Tensor[(3), float32]) {
      negative(%y)
    }

    def @unused(%z: Tensor[(3), float32]) {
      %z
    }

After ``RemoveUnusedFunctions()``: ``@unused`` is gone, ``@main`` and ``@f`` stay.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from passhost.errors import PassError
from passhost.ir import Function, GlobalVar, IRModule, post_order
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import module_pass

__all__ = ["global_refs", "reachable_functions", "remove_unused_functions", "RemoveUnusedFunctions"]


def global_refs(func: Any) -> list:
    """The global variables ``func`` mentions, in post-order, each once."""
    if type(func) is not Function:
        return []
    return [n for n in post_order(func) if type(n) is GlobalVar]


def reachable_functions(mod: IRModule, entry_functions: Iterable[str]) -> set:
    """Names of the functions of ``mod`` reachable from ``entry_functions``."""
    with _gc_paused():
        seen: set = set()
        stack: list = []
        for name in entry_functions:
            if name not in mod:
                names = ", ".join(sorted(g.name_hint for g in mod)) or "none"
                raise PassError(f"RemoveUnusedFunctions: entry function @{name} is not in the module "
                                f"(functions: {names}); pass entry_functions naming existing functions",
                                "RemoveUnusedFunctions")
            if name not in seen:
                seen.add(name)
                stack.append(name)
        while stack:
            name = stack.pop()
            for gv in global_refs(mod[name]):
                n = gv.name_hint
                if n not in seen and n in mod:
                    seen.add(n)
                    stack.append(n)
        return seen


def remove_unused_functions(mod: IRModule, entry_functions: Optional[Iterable[str]] = None) -> IRModule:
    """``mod`` without the functions unreachable from ``entry_functions`` (default ``["main"]``)."""
    keep = reachable_functions(mod, ["main"] if entry_functions is None else entry_functions)
    out = mod.copy()
    for gv in list(mod):
        if gv.name_hint not in keep:
            del out[gv]
    return out


@module_pass(opt_level=1, name="RemoveUnusedFunctions", preserves_types=True)
class RemoveUnusedFunctions:
    """Remove the global functions that no entry function reaches (calls or references).

    Module pass, ``opt_level`` 1. Before / after::

        def @main(%x) { @f(%x) }       |  def @main(%x) { @f(%x) }
        def @f(%y) { negative(%y) }    |  def @f(%y) { negative(%y) }
        def @unused(%z) { %z }         |

    :param entry_functions: names of the functions to keep with everything they reach
        (default ``["main"]``)
    """

    def __init__(self, entry_functions: Optional[Iterable[str]] = None) -> None:
        if entry_functions is None:
            entry_functions = ["main"]
        if isinstance(entry_functions, str) or not all(isinstance(n, str) for n in entry_functions):
            raise PassError(f"RemoveUnusedFunctions: entry_functions must be a list of function names, "
                            f"got {entry_functions!r}", "RemoveUnusedFunctions")
        self.entry_functions = list(entry_functions)

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return remove_unused_functions(mod, self.entry_functions)
