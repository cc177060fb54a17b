"""The call graph of a module and its recursive functions (what Inline may not inline)."""
from __future__ import annotations

from passhost.ir import Function, GlobalVar, IRModule, post_order

__all__ = ["call_graph", "recursive_functions"]


def call_graph(mod: IRModule) -> dict:
    """``{name: [names of the globals it mentions, each once, in order]}``."""
    graph: dict = {}
    for gv, func in mod.items():
        refs: list = []
        seen: set = set()
        if type(func) is Function:
            for n in post_order(func):
                if type(n) is GlobalVar and n.name_hint in mod and n.name_hint not in seen:
                    seen.add(n.name_hint)
                    refs.append(n.name_hint)
        graph[gv.name_hint] = refs
    return graph


def recursive_functions(graph: dict) -> set:
    """Names on a cycle of ``graph`` (self-calls included): Tarjan's SCCs, iteratively."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    comp_stack: list = []
    out: set = set()
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        index[start] = low[start] = counter
        counter += 1
        comp_stack.append(start)
        on_stack.add(start)
        while work:
            node, i = work[-1]
            succ = graph[node]
            if i < len(succ):
                work[-1] = (node, i + 1)
                w = succ[i]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    comp_stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[node] = min(low[node], index[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = comp_stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    out.update(comp)
    return out
