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
from passhost.ir import Call, Constant, Expr, Function, Op, Tuple, TupleGetItem, rewrite_post_order
from passhost.transform import function_pass

__all__ = ["eliminate_common_subexpr", "EliminateCommonSubexpr"]

#: tags that keep scalar-constant and tuple keys apart from node keys
_SCALAR = object()
_TUPLE = object()


def _scalar_key(c: Constant) -> tuple:
    data = c.data
    return (_SCALAR, data.dtype.name, data.tobytes())


def _arg_key(a: Expr) -> Any:
    """Hashable stand-in for ``a`` under TVM's argument equivalence: equal keys iff
    the arguments are the same node, equal scalar constants, or tuples whose fields
    are pairwise so (one level)."""
    t = type(a)
    if t is Constant:
        return _scalar_key(a) if a.data.ndim == 0 else a
    if t is Tuple:
        return (_TUPLE,) + tuple(
            _scalar_key(f) if type(f) is Constant and f.data.ndim == 0 else f for f in a.fields)
    return a


def eliminate_common_subexpr(expr: Expr, fskip: Optional[Callable[[Expr], bool]] = None) -> Expr:
    """Merge common sub-expressions of ``expr`` (usually a ``Function``).

    :param fskip: ``fskip(call_or_getitem) -> bool``; ``True`` keeps that node apart
    :returns: the rewritten expression -- ``expr`` itself when nothing merges
    """
    calls: dict = {}
    getitems: dict = {}
    _Call, _TGI, _Op, _Constant = Call, TupleGetItem, Op, Constant

    def rewrite(node: Expr) -> Optional[Expr]:
        t = type(node)
        if t is _Call:
            op = node.op
            args = node.args
            if type(op) is not _Op or not args or op._def.stateful:
                return None
            if fskip is not None and fskip(node):
                return None
            if len(args) == 2:  # the common case, without a generator
                a, b = args
                ka = a if type(a) is not _Constant and type(a) is not Tuple else _arg_key(a)
                kb = b if type(b) is not _Constant and type(b) is not Tuple else _arg_key(b)
                key = (op, node.attrs, ka, kb)
            else:
                key = (op, node.attrs) + tuple(_arg_key(a) for a in args)
            prev = calls.setdefault(key, node)
            return None if prev is node else prev
        if t is _TGI:
            if fskip is not None and fskip(node):
                return None
            prev = getitems.setdefault((node.tuple_value, node.index), node)
            return None if prev is node else prev
        return None

    return rewrite_post_order(expr, rewrite, keep_types=True)


@function_pass(opt_level=3, name="EliminateCommonSubexpr", required=["InferType"])
class EliminateCommonSubexpr:
    """Eliminate common sub-expressions: identical operator calls are computed once.

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
