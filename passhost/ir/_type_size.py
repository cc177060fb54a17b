"""How big a type is, for the printer: which inferred types it writes out.

A type nests (tuples of tuples, functions returning functions), and a program 100,000
levels deep has 100,000 ever deeper types. The printer writes an inferred type -- a
``/* ty=... */`` comment, a typed function's ``-> T``, a typed ``let`` variable's ``: T``
-- only when :func:`measure` finds it within :data:`MAX_TYPE_DEPTH` and
:data:`MAX_TYPE_PARTS`: inference gives the others back when the text is read, and the
text stays linear in the program's size::

    %1 = (%0,) /* ty=((float32,),) */;      # written: 3 levels
    %9 = (%8,);                            # 100 levels: left to inference
"""
from __future__ import annotations

from .types import FuncType, TupleType, Type

__all__ = ["MAX_TYPE_DEPTH", "MAX_TYPE_PARTS", "measure"]

#: an inferred type -- a ``/* ty=... */`` comment, a typed function's ``-> T``, a typed
#: ``let`` variable's ``: T`` -- is written out only when it nests at most this deep and
#: has at most :data:`MAX_TYPE_PARTS` parts (tensors, tuples, functions); inference gives
#: the others back when the text is read, and the text stays linear in the program's size
#: (a 100,000-deep nested tuple has 100,000 ever deeper types: written out at every level
#: they would take 5 * 10**9 parts)
MAX_TYPE_DEPTH = 64
MAX_TYPE_PARTS = 4096


def measure(t: Type, sizes: dict) -> tuple:
    """``(depth, parts)`` of ``t``, both saturated just past :data:`MAX_TYPE_DEPTH` and
    :data:`MAX_TYPE_PARTS`; ``sizes`` remembers them by ``id`` for ``t`` and every type under
    it, so a chain of types nesting one another is measured in one step per type."""
    stack: list = [t]
    push, pop = stack.append, stack.pop
    done = _MEASURED
    while stack:
        x = pop()
        if x is done:
            x = pop()
            kids = x.fields if type(x) is TupleType else x.arg_types + (x.ret_type,)
            depth, parts = 0, 1
            for k in kids:
                d, n = sizes.get(id(k), _LEAF)
                if d > depth:
                    depth = d
                parts += n
            sizes[id(x)] = (min(depth + 1, MAX_TYPE_DEPTH + 1), min(parts, MAX_TYPE_PARTS + 1))
            continue
        tx = type(x)
        if id(x) in sizes or (tx is not TupleType and tx is not FuncType):
            continue  # measured, or a leaf (a tensor type: depth 1, one part)
        push(x)
        push(done)
        for k in (x.fields if tx is TupleType else x.arg_types + (x.ret_type,)):
            tk = type(k)
            if (tk is TupleType or tk is FuncType) and id(k) not in sizes:
                push(k)
    return sizes.get(id(t), _LEAF)


_LEAF = (1, 1)
_MEASURED = object()  # on measure's stack: the type below has all its parts measured
