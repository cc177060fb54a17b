"""FoldConstant: evaluate, at compile time, every operator call whose arguments are constants.

The algorithm of TVM's ``relay.transform.FoldConstant`` (``fold_constant.cc``), as a
single post-order rewrite with an explicit stack (a 100,000-deep chain folds at the
default recursion limit, in time linear in the graph size):

* nothing inside a function marked ``Primitive=1`` is touched;
* a call is left alone when it has no arguments, its callee is not an operator, the
  operator is stateful (``nn.dropout``) or non-computational (``on_device``, ``qnn.*``
  unless ``fold_qnn``), or it is ``device_copy``;
* ``shape_of`` / ``ndarray_size`` of a tensor whose static shape is fully known become
  constants even when the tensor itself is not constant (a rank-0 input gives the empty
  shape ``[]`` and size 1 -- TVM's answer there is meaningless, see TVM-NOTES §4.2);
* a call whose arguments are all constants (or tuples of constants) is evaluated with
  the operator's host kernel (``op.compute``); a tuple result becomes a ``Tuple`` of
  ``Constant`` nodes;
* ``let %v = <constant>; body`` substitutes the constant for ``%v`` and drops the binding;
* ``if`` with a constant condition becomes the branch taken;
* ``(a, b, ...).i`` of a literal tuple becomes its field, constant or not.

The walk (:mod:`._walk`) rewrites each node once, bottom-up, with an explicit stack; a
let's variable is mapped to its folded value *between* rewriting the value and walking
the body, which a generic ``rewrite_post_order`` cannot do. A kernel applied to the same
constant nodes with the same attributes is run once per fold (each use still gets its
own ``Constant``).

Rebuilt nodes keep the type of the node they replace (as TVM's copy-on-write does),
and when nothing folds the very same expression object is returned, so the type
inference that follows every function pass has nothing to do.

**Fixed-point memo.** Folding is idempotent: folding a folded function finds nothing to
fold and returns it as it is (see :func:`fold_constant` for why). So every typed
function that :func:`fold_constant` returns is remembered, weakly, with its ``fold_qnn``
option, and folding it again with the same option returns it at once -- in ``-O3``,
FoldScaleAxis's inner FoldConstant gets back the very function FoldConstant produced.

Before (the example of ``tests/python/relay/test_pass_fold_constant.py``)::

    def @main(%x: Tensor[(1, 2, 3), float32]) {
      %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);
      %1 = multiply(%0, 2f);
      %2 = add(%x, %1);
      add(%2, meta[relay.Constant][0])
    }

After ``FoldConstant()``::

    def @main(%x: Tensor[(1, 2, 3), float32]) -> Tensor[(1, 2, 3), float32] {
      %0 = add(%x, meta[relay.Constant][0] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */;
      add(%0, meta[relay.Constant][1] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */
    }
"""

from __future__ import annotations

from typing import Any


from passhost.errors import PassError
from passhost.ir import Expr, Function, is_primitive
from passhost.ir import paused_gc as _gc_paused
from passhost.ir import quiet_kernels
from passhost.transform import function_pass

from ._eval import evaluate_call, is_complex_constant, is_simple_constant
from ._walk import _fold

__all__ = [
    "fold_constant",
    "is_primitive",
    "is_simple_constant",
    "is_complex_constant",
    "evaluate_call",
    "FoldConstant",
]

def fold_constant(expr: Expr, fold_qnn: bool = False) -> Expr:
    """Fold the constants of ``expr`` (usually a ``Function``); see the module docstring.

    Folding is idempotent on typed functions (``fold(fold(f))`` is ``fold(f)`` itself):
    in a folded function every operator call with all-constant arguments has been
    evaluated (arguments are rewritten before their call, so a call whose arguments
    *became* constants folded too), ``shape_of``/``ndarray_size`` of a statically shaped
    tensor has become a constant, no ``let`` binds a constant, no ``if`` has a constant
    condition and no ``TupleGetItem`` reads a literal tuple -- each rule's input is gone
    from the output, and no rule creates another rule's input. The pass declares it
    (``idempotent=True``), so the pass manager skips a function it returned before
    (:mod:`passhost.ir.facts`); this function itself always walks.

    :param fold_qnn: also evaluate ``qnn.*`` operators (non-computational otherwise)
    :returns: the folded expression -- ``expr`` itself when nothing folds
    """
    if is_primitive(expr):
        return expr
    with _gc_paused(), quiet_kernels():
        return _fold(expr, bool(fold_qnn))


# ---------------------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------------------


@function_pass(opt_level=2, name="FoldConstant", preserves_types=True, idempotent=True)
class FoldConstant:
    """Fold constant sub-expressions: evaluate operator calls whose arguments are constants.

    Function pass, ``opt_level`` 2. Before / after::

        %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);   |
        %1 = multiply(%0, 2f);                                        |
        %2 = add(%x, %1);                                             |  %0 = add(%x, meta[relay.Constant][0]);
        add(%2, meta[relay.Constant][0])                              |  add(%0, meta[relay.Constant][1])

    :param fold_qnn: also evaluate ``qnn.*`` operators (default ``False``, as in TVM)
    """

    def __init__(self, fold_qnn: bool = False) -> None:
        if not isinstance(fold_qnn, bool):
            raise PassError(f"FoldConstant: fold_qnn must be True or False, got {fold_qnn!r}",
                            "FoldConstant")
        self.fold_qnn = fold_qnn

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return fold_constant(func, fold_qnn=self.fold_qnn)
