"""Inline: inline the global functions marked ``Inline=1`` (TVM's ``inline.cc``, ``InlineGlobals``).

A global function can be inlined when it is marked ``Inline`` (non-zero), is not
recursive (not on a cycle of the call graph), and -- after its own callees have been
inlined into it -- calls no other global function (TVM's ``CanInline``). Functions are
processed callees first, so chains of inline functions collapse completely. At a call
site ``@f(a, b)``:

* usually the call is replaced by the body of ``@f`` with its parameters replaced by
  the arguments (variables bound inside the body are renamed per copy, so a body
  inlined twice binds distinct variables);
* when ``@f`` carries a ``Compiler`` attribute (a function for an external codegen) or
  a non-zero ``Extern``, its body must stay packed: the call becomes a call of the
  function literal, ``fn (...) { ... }(a, b)`` (TVM's ``MakeNewExpr``).

A reference to ``@f`` that is not a call becomes the function itself. Afterwards an
inline function that was referenced before and no longer is, is removed from the
module; unreferenced entry functions (``main``) always stay.

The pass's registry name is ``Inline`` (the name ``passhost.passes.get`` takes); TVM's
``PassInfo`` name for it is ``InlineGlobals`` (see ``docs/passes.md``).

Before::

    def @main(%x: Tensor[(3), float32]) {
      @sq(%x)
    }

    def @sq(%y: Tensor[(3), float32], Inline=1) {
      multiply(%y, %y)
    }

After ``Inline()``::

    def @main(%x: Tensor[(3), float32]) {
      multiply(%x, %x)
    }
"""
from __future__ import annotations

from typing import Any

from passhost.errors import PassError
from passhost.ir import Call, Function, GlobalVar, IRModule, Var, bound_vars, post_order, rewrite_post_order
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import module_pass

from .call_graph import call_graph, recursive_functions

__all__ = ["call_graph", "recursive_functions", "inline_call", "inline", "Inline"]


def inline_call(func: Function, args: Any) -> Any:
    """The body of ``func`` with its parameters replaced by ``args`` (bound variables renamed)."""
    if len(args) != len(func.params):
        raise PassError(f"Inline: a call passes {len(args)} arguments to a function of "
                        f"{len(func.params)} parameters; fix the call", "InlineGlobals")
    memo: dict = dict(zip(func.params, args))
    for v in bound_vars(func.body):
        memo[v] = Var(v.name_hint, v.type_annotation)
    return rewrite_post_order(func.body, None, memo=memo)


def _inlinable(func: Any) -> bool:
    return type(func) is Function and bool(func.attrs.get("Inline", 0))


def _keeps_body_packed(func: Function) -> bool:
    """A function for an external codegen: calls become calls of the function literal."""
    return bool(func.attrs.get("Compiler")) or bool(func.attrs.get("Extern", 0))


def inline(mod: IRModule) -> IRModule:
    """``mod`` with calls to inline-marked global functions inlined (see the module docs)."""
    with _gc_paused():
        graph = call_graph(mod)
        recursive = recursive_functions(graph)
        referenced = {n for refs in graph.values() for n in refs}
        # callees first: a post-order of the (acyclic part of the) call graph
        order: list = []
        seen: set = set()
        for start in graph:
            if start in seen:
                continue
            seen.add(start)
            work = [(start, iter(graph[start]))]
            while work:
                node, it = work[-1]
                for w in it:
                    if w not in seen:
                        seen.add(w)
                        work.append((w, iter(graph[w])))
                        break
                else:
                    work.pop()
                    order.append(node)
        out = mod.copy()
        current = {gv.name_hint: f for gv, f in mod.items()}
        candidates: set = set()
        candidate_funcs: set = set()
        for name in order:
            func = current[name]
            if type(func) is not Function:
                continue

            def rewrite(node: Any) -> Any:
                # a candidate's GlobalVar is replaced first (a child), so a call to it
                # arrives here with the candidate function itself as callee (and stays
                # a call of the function literal when the candidate keeps its body packed)
                if type(node) is Call and node.op in candidate_funcs:
                    return inline_call(node.op, node.args)
                if type(node) is GlobalVar and node.name_hint in candidates:
                    return current[node.name_hint]
                return None

            new_func = func
            if any(r in candidates for r in graph[name]):
                new_func = rewrite_post_order(func, rewrite)
                current[name] = new_func
                out[mod.get_global_var(name)] = new_func
            remaining = [r for r in graph[name] if r not in candidates]
            if _inlinable(new_func) and name not in recursive and not remaining:
                candidates.add(name)
                if not _keeps_body_packed(new_func):
                    candidate_funcs.add(new_func)
        # remove inlined functions nobody references any more (entries always stay)
        still: set = set()
        for func in out.functions.values():
            if type(func) is Function:
                for n in post_order(func):
                    if type(n) is GlobalVar:
                        still.add(n.name_hint)
        for name in candidates:
            if name in referenced and name not in still:
                del out[name]
        return out


@module_pass(opt_level=1, name="Inline", preserves_types=True)
class Inline:
    """Inline the global functions marked ``Inline=1`` into their callers and drop them.

    Module pass, ``opt_level`` 1; TVM registers it as ``InlineGlobals``. Before / after::

        def @main(%x) { @sq(%x) }                      |  def @main(%x) {
        def @sq(%y, Inline=1) { multiply(%y, %y) }     |    multiply(%x, %x)
                                                       |  }
    """

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return inline(mod)
