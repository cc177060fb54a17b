"""CanonicalizeOps: rewrite ``nn.bias_add`` into a broadcast ``add``, as one rule.

TVM's ``relay.transform.CanonicalizeOps`` (``canonicalize_ops.cc``): a function pass
(``opt_level`` 3, requires ``InferType``) that replaces every
``nn.bias_add(x, b, axis)`` by ``add(x, expand_dims(b, axis=1, num_newaxis=n-axis-1))``
for an ``n``-D ``x`` (a negative ``axis`` counts from the end); when ``n-axis-1`` is 0
the bias is added as it is, without an ``expand_dims``.

The pass is the rule :class:`BiasAddToAdd` over the host's rewrite driver
(:func:`passhost.transform.pattern_pass`): the driver indexes it by ``nn.bias_add``,
skips a function that calls none (no walk at all when none was ever built), rewrites in
one explicit-stack sweep and types the replacement like the node it replaces.

Before::

    def @main(%x: Tensor[(1, 4, 5, 5), float32], %b: Tensor[(4), float32]) {
      nn.bias_add(%x, %b)
    }

After ``CanonicalizeOps()``::

    def @main(%x: Tensor[(1, 4, 5, 5), float32], %b: Tensor[(4), float32]) -> Tensor[(1, 4, 5, 5), float32] {
      %0 = expand_dims(%b, axis=1, num_newaxis=2);
      add(%x, %0)
    }
"""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir import Expr
from passhost.ir.pattern import DFPatternCallback, is_op, rewrite, wildcard
from passhost.transform import pattern_pass

__all__ = ["canonicalize_ops", "BiasAddToAdd", "CanonicalizeOps"]


# the replacement's operators, called with Call directly: the builders' argument
# conversion is not needed for expressions, and it is a third of the rule's time
_ADD = ir.Op.get("add")


class BiasAddToAdd(DFPatternCallback):
    """``nn.bias_add(x, b, axis)`` -> ``add(x, expand_dims(b, axis=1, num_newaxis=n-axis-1))``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, rewrite_once=True, name="bias_add_to_add")
        self.pattern = is_op("nn.bias_add")(wildcard(), wildcard())

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        ty = pre.args[0].checked_type
        if not isinstance(ty, ir.TensorType):
            return None
        ndim = len(ty.shape)
        axis = post.attrs.axis
        axis = axis + ndim if axis < 0 else axis
        data, bias = post.args
        return ir.Call(_ADD, (data, ir.expand_bias_to_match_axis(bias, ndim, axis)))


_RULES = [BiasAddToAdd()]


def canonicalize_ops(expr: Expr) -> Expr:
    """Replace every ``nn.bias_add`` of ``expr`` by ``add`` + ``expand_dims``.

    An untyped ``expr`` is type-inferred first (in place): the rule needs the data's rank.

    :returns: the rewritten expression -- ``expr`` itself when it has no ``bias_add``
    """
    return rewrite(_RULES, expr)


def CanonicalizeOps():  # noqa: N802 - TVM-style pass constructor
    """Rewrite ``nn.bias_add(x, b, axis)`` into ``add(x, expand_dims(b, ...))``."""
    return pattern_pass("CanonicalizeOps", _RULES, opt_level=3, doc=__doc__)
