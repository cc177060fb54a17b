"""How often each ``let``-bound variable is used, on the paths that are live: the use
analysis (:mod:`.dataflow`) for bindings, as TVM's DeadCodeElimination counts them.

Only 0, 1 and "more than one" (2) matter: a binding used 0 times may go, one used once may
be inlined. A use counts once per path from the function's body that reaches it (a use
inside a sub-expression shared by two parents counts twice, as TVM's visitor visits it
twice), twice inside a nested function (which may run many times), and not at all inside
the value of a binding that is dead by then -- so a whole dead chain is found in one walk::

    let %a = add(%x, 1f);            # %a: 0 (its only use is in %b's value, and %b is dead)
    let %b = multiply(%a, 2f);       # %b: 0
    let %c = negative(%x);           # %c: 1
    %c
"""
from __future__ import annotations

from typing import Callable, Optional

from .._gc import gc_paused
from ..expr import Call, Constant, Expr, Function, GlobalVar, Let, Op, TupleGetItem, Var
from ..visitor import children

__all__ = ["binding_uses"]

#: nodes that hold no variable use
_INERT = frozenset({Constant, Op, GlobalVar})


# hot loop: one step per node of the function (DeadCodeElimination on every let chain);
# the lets of a chain (a spine) and calls of variables and constants are handled in line,
# without a stack entry or a helper call each
@gc_paused
def binding_uses(root: Expr, dead: Callable[[Expr], bool], values: Optional[dict] = None) -> dict:
    """``{let-bound variable: 0, 1 or 2}`` for the lets of ``root``, a function (walked from
    its body) or any expression (see the module docs).

    A run of nested lets (a *spine*) is registered top-down, its body walked, and only then
    are the bound values walked bottom-up, each only if its variable has been used by then
    or ``dead(value)`` is false (every use of a let's variable lies in its body, so this is
    TVM's "walk the value at the first use" without remembering deferred values). A shared
    sub-expression is walked at most twice.

    :param dead: whether a binding not used so far may go without its value being walked
        (DeadCodeElimination: its value is pure)
    :param values: a dict that gets ``{variable: value}`` for every let met, top-down
        (before ``dead`` is asked about the values below)
    """
    counts: dict = {}
    depth_of: dict = {}
    visits: dict = {}
    let_value = {} if values is None else values
    is_dead = dead
    _Var, _Let, _Function, _Call, _TGI, _Op = Var, Let, Function, Call, TupleGetItem, Op
    inert = _INERT
    stack: list = [(root.body if type(root) is Function else root, 0)]
    push = stack.append
    pop = stack.pop
    while stack:
        node, d = pop()
        if d < 0:  # a spine marker: walk the values of its lets, last first
            spine, i = node
            d = -1 - d
            while i >= 0:
                let = spine[i]
                i -= 1
                value = let.value
                if counts[let.var] == 0 and is_dead(value):
                    continue  # dead so far: its value is never walked
                tv = type(value)
                if tv is _Call and type(value.op) is _Op:
                    args = value.args
                    for a in args:
                        ta = type(a)
                        if ta is not _Var and ta not in inert:
                            break
                    else:  # only variables and constants: count here, in line
                        n = visits.get(value, 0)
                        if n >= 2:
                            continue
                        visits[value] = n + 1
                        for a in args:
                            if type(a) is _Var:
                                bd = depth_of.get(a)
                                if bd is not None:
                                    c = counts[a]
                                    if c < 2:
                                        counts[a] = c + (2 if d > bd else 1)
                        continue
                elif tv is _Var:
                    bd = depth_of.get(value)
                    if bd is not None:
                        c = counts[value]
                        if c < 2:
                            counts[value] = c + (2 if d > bd else 1)
                    continue
                elif tv in inert:
                    continue
                # a larger value: walk it before the earlier lets of the spine
                push(((spine, i), -1 - d))
                push((value, d))
                break
            continue
        while True:  # follows bodies without going through the stack
            t = type(node)
            if t is _Var:
                bd = depth_of.get(node)
                if bd is not None:
                    c = counts[node]
                    if c < 2:
                        counts[node] = c + (2 if d > bd else 1)
                break
            if t in inert:
                break
            n = visits.get(node, 0)
            if n >= 2:
                break
            visits[node] = n + 1
            if t is _Let:
                spine = []
                while True:
                    var = node.var
                    let_value[var] = node.value
                    depth_of[var] = d
                    if var not in counts:
                        counts[var] = 0
                    spine.append(node)
                    node = node.body
                    if type(node) is not _Let:
                        break
                    n = visits.get(node, 0)
                    if n >= 2:
                        node = None
                        break
                    visits[node] = n + 1
                push(((spine, len(spine) - 1), -1 - d))
                if node is None:
                    break
                continue
            if t is _Call:
                op = node.op
                if type(op) is not _Op:
                    push((op, d))
                for a in node.args:
                    ta = type(a)
                    if ta is _Var:  # a use, counted here rather than via the stack
                        bd = depth_of.get(a)
                        if bd is not None:
                            c = counts[a]
                            if c < 2:
                                counts[a] = c + (2 if d > bd else 1)
                    elif ta not in inert:
                        push((a, d))
                break
            if t is _Function:
                node = node.body
                d += 1
                continue
            if t is _TGI:
                node = node.tuple_value
                continue
            for k in children(node):  # a tuple's fields, an if's condition and branches
                push((k, d))
            break
    return counts

