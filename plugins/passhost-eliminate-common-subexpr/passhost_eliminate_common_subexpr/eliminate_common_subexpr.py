"""EliminateCommonSubexpr: merge operator calls (and tuple projections) that compute the same value.

The algorithm of TVM's ``relay.transform.EliminateCommonSubexpr``
(``eliminate_common_subexpr.cc``): a post-order rewrite over the whole function
(nested functions and let values included) that remembers every call it keeps.

* A call ``f(args, attrs)`` is looked up among the earlier calls of the **same
  operator**: it matches one whose attrs are structurally equal and whose arguments
  are pairwise *equivalent* -- the very same node, or two **scalar** constants of equal
  dtype and value; two ``Tuple`` arguments are compared field by field with the same
  rule (one level deep). On a match the earlier call replaces this one; otherwise this
  call is recorded. Calls with no arguments, calls of non-operators, calls of stateful
  operators (``nn.dropout``) and calls ``fskip`` rejects are kept and never recorded.
* ``t.i`` is replaced by an earlier ``t.i`` of the same tuple node.
* Because the rewrite is post-order, merges cascade upwards.

TVM compares each call with every earlier call of the same operator, which is
quadratic on long chains; here the equivalence above is turned into a hash key, so
the pass is linear in the size of the graph and finds exactly TVM's matches.

Before::

    def @main(%x: Tensor[(1, 16), float32]) {
      %0 = nn.relu(%x);
      %1 = nn.relu(%x);
      %2 = add(%0, 1f);
      %3 = add(%1, 1f);
      add(%2, %3)
    }

After ``EliminateCommonSubexpr()``::

    def @main(%x: Tensor[(1, 16), float32]) -> Tensor[(1, 16), float32] {
      %0 = nn.relu(%x);
      %1 = add(%0, 1f);
      add(%1, %1)
    }
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    Op,
    Tuple,
    TupleGetItem,
    Var,
    children,
    keep_checked_type,
    post_order,
    with_children,
)
from passhost.ir._gc import paused as _gc_paused
from passhost.transform import function_pass

__all__ = ["eliminate_common_subexpr", "EliminateCommonSubexpr"]

#: tags that keep scalar-constant and tuple keys apart from node keys
_SCALAR = object()
_TUPLE = object()


def _scalar_key(c: Constant) -> tuple:
    data = c.data
    return (_SCALAR, data.dtype, data.tobytes())


def _field_key(f: Expr, const_keys: dict) -> Any:
    if type(f) is Constant:
        k = const_keys.get(f)
        if k is None:
            k = const_keys[f] = _scalar_key(f) if f.data.ndim == 0 else f
        return k
    return f


def _rebuild_call(node: Call, args: tuple) -> Call:
    """``node`` with new ``args``, keeping its type when every argument is typed."""
    return node.with_args(args)



def _arg_key(a: Expr, const_keys: dict) -> Any:
    """Hashable stand-in for ``a`` under TVM's argument equivalence: equal keys iff
    the arguments are the same node, equal scalar constants, or tuples whose fields
    are pairwise so (one level)."""
    t = type(a)
    if t is Tuple:
        return (_TUPLE,) + tuple(_field_key(f, const_keys) for f in a.fields)
    return _field_key(a, const_keys)


def eliminate_common_subexpr(expr: Expr, fskip: Optional[Callable[[Expr], bool]] = None) -> Expr:
    """Merge common sub-expressions of ``expr`` (usually a ``Function``).

    :param fskip: ``fskip(call_or_getitem) -> bool``; ``True`` keeps that node apart
    :returns: the rewritten expression -- ``expr`` itself when nothing merges
    """
    with _gc_paused():
        return _cse(expr, fskip)


def _cse(expr: Expr, fskip: Optional[Callable[[Expr], bool]]) -> Expr:
    calls: dict = {}
    getitems: dict = {}
    const_keys: dict = {}  # Constant -> its key (computed once per constant node)
    attr_ids: dict = {}  # id(attrs) -> (small int naming its equality class, attrs)
    attr_classes: dict = {}  # attrs -> that int
    memo: dict = {}  # old node -> its replacement (only for nodes that changed)
    get = memo.get
    setdefault = calls.setdefault
    _Call, _TGI, _Op, _Constant, _Tuple = Call, TupleGetItem, Op, Constant, Tuple
    leaves = (Var, Constant, Op, GlobalVar)
    for node in post_order(expr):
        t = type(node)
        if t is _Call:
            # 1. rebuild with the rewritten arguments (identity kept when none changed)
            op = node.op
            args = node.args
            if len(args) == 2 and type(op) is _Op:  # the common case, unrolled
                a, b = args
                na = get(a, a)
                nb = get(b, b)
                if na is a and nb is b:
                    new = node
                else:
                    new = _rebuild_call(node, (na, nb))
                    a, b = na, nb
            else:
                nop = get(op, op)
                nargs = tuple([get(x, x) for x in args])
                if nop is op and all(x is y for x, y in zip(nargs, args)):
                    new = node
                elif nop is op:
                    new = _rebuild_call(node, nargs)
                else:
                    new = keep_checked_type(node, Call(nop, nargs, node.attrs if type(nop) is type(op) else None))
                    op = nop
                args = nargs
            # 2. look the call up among the earlier ones
            if type(op) is _Op and args and not op._def.stateful and (fskip is None or not fskip(new)):
                attrs = new.attrs
                ak = attr_ids.get(id(attrs))
                if ak is None:  # hash the attrs once per attrs object, not once per call
                    ak = attr_ids[id(attrs)] = (attr_classes.setdefault(attrs, len(attr_classes)), attrs)
                if len(args) == 2:
                    ta, tb = type(a), type(b)
                    ka = a if ta is not _Constant and ta is not _Tuple else _arg_key(a, const_keys)
                    kb = b if tb is not _Constant and tb is not _Tuple else _arg_key(b, const_keys)
                    key = (op, ak[0], ka, kb)
                else:
                    key = (op, ak[0]) + tuple([_arg_key(x, const_keys) for x in args])
                new = setdefault(key, new)
            if new is not node:
                memo[node] = new
        elif t in leaves:
            continue
        else:
            kids = children(node)
            new = with_children(node, tuple([get(k, k) for k in kids]))
            if new is not node:
                new = keep_checked_type(node, new)
            if t is _TGI and (fskip is None or not fskip(new)):
                new = getitems.setdefault((new.tuple_value, new.index), new)
            if new is not node:
                memo[node] = new
    return get(expr, expr)


@function_pass(opt_level=3, name="EliminateCommonSubexpr", required=["InferType"])
class EliminateCommonSubexpr:
    """Eliminate common sub-expressions: identical operator calls are computed once.

    Function pass, ``opt_level`` 3, requires ``InferType``. Before / after::

        %0 = nn.relu(%x);      |
        %1 = nn.relu(%x);      |  %0 = nn.relu(%x);
        %2 = add(%0, 1f);      |  %1 = add(%0, 1f);
        %3 = add(%1, 1f);      |  add(%1, %1)
        add(%2, %3)            |

    :param fskip: optional ``fskip(expr) -> bool``; calls (and tuple projections) for
        which it returns ``True`` are neither merged nor used as merge targets
    """

    def __init__(self, fskip: Optional[Callable[[Expr], bool]] = None) -> None:
        if fskip is not None and not callable(fskip):
            raise PassError(
                f"EliminateCommonSubexpr: fskip must be a callable expr -> bool or None, got {fskip!r}",
                "EliminateCommonSubexpr")
        self.fskip = fskip

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return eliminate_common_subexpr(func, self.fskip)
