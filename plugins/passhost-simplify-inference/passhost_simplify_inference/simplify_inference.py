"""SimplifyInference: replace training-style normalisation operators by plain arithmetic.

TVM's ``relay.transform.SimplifyInference`` (``simplify_inference.cc``): a function
pass (``opt_level`` 0, requires ``InferType``) rewriting, bottom-up:

* ``nn.batch_norm(data, gamma, beta, mean, var)[0]`` into, in this exact op order::

      scale = divide(1, sqrt(add(var, eps)))      # then multiply(scale, gamma) if scale=True
      shift = multiply(negative(mean), scale)     # then add(shift, beta)       if center=True
      add(multiply(data, expand(scale)), expand(shift))

  where ``expand(v)`` is ``expand_dims(v, axis=1, num_newaxis=ndim-axis-1)`` (left out
  when that is 0). Only item 0 is rewritten; the ``batch_norm`` call itself stays for
  items 1 and 2 if they are used;
* ``nn.dropout(x)[0]`` into ``x``;
* ``nn.layer_norm(data, gamma, beta)`` into ``(data - mean) / sqrt(variance + eps)``
  times ``expand(gamma)`` plus ``expand(beta)`` (reduction over ``axis``);
* ``nn.instance_norm`` likewise, reducing over every axis but 0 and ``axis``
  (its ``eps`` constant is float32, as in TVM).

Constants are scalars of the data's dtype. The pass is four one-sweep rules
(``rewrite_once``: their replacements hold nothing they match, as in TVM's single
post-order mutation): :class:`BatchNormToInfer`, :class:`DropoutToIdentity`,
:class:`LayerNormToInfer` and :class:`InstanceNormToInfer`, over the host's rewrite driver
(:func:`passhost.transform.pattern_pass`): one explicit-stack sweep, so a 100,000-deep
chain works at the default recursion limit; a function calling none of the four
operators is not walked; unchanged sub-graphs keep their identity, and replacements are
typed like the nodes they replace.

Before::

    def @main(%x: Tensor[(1, 2, 3, 3), float32], %g: Tensor[(2), float32], %b: Tensor[(2), float32],
              %m: Tensor[(2), float32], %v: Tensor[(2), float32]) {
      %0 = nn.batch_norm(%x, %g, %b, %m, %v);
      %0.0
    }

After ``SimplifyInference()``::

    def @main(%x: Tensor[(1, 2, 3, 3), float32], %g: Tensor[(2), float32], %b: Tensor[(2), float32],
              %m: Tensor[(2), float32], %v: Tensor[(2), float32]) -> Tensor[(1, 2, 3, 3), float32] {
      %0 = add(%v, 1e-05f);
      %1 = sqrt(%0);
      %2 = divide(1f, %1);
      %3 = multiply(%2, %g);
      %4 = expand_dims(%3, axis=1, num_newaxis=2);
      %5 = negative(%m);
      %6 = multiply(%5, %3);
      %7 = add(%6, %b);
      %8 = multiply(%x, %4);
      %9 = expand_dims(%7, axis=1, num_newaxis=2);
      add(%8, %9)
    }
"""
from __future__ import annotations

from typing import Callable, Optional


from passhost.errors import PassError
from passhost.ir import Expr, TensorType, rewrite_post_order, type_of
from passhost.ir.pattern import DFPatternCallback, is_op, is_tuple_get_item, rewrite, wildcard
from passhost.transform import pattern_pass

from .unpack import batch_norm_to_infer, instance_norm_to_infer, layer_norm_to_infer

__all__ = [
    "simplify_inference",
    "rewrite_with_original",
    "batch_norm_to_infer",
    "layer_norm_to_infer",
    "instance_norm_to_infer",
    "BatchNormToInfer",
    "DropoutToIdentity",
    "LayerNormToInfer",
    "InstanceNormToInfer",
    "SimplifyInference",
]

# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def rewrite_with_original(root: Expr, rewrite: Callable[[Expr, Expr], Optional[Expr]]) -> Expr:
    """Rebuild ``root`` bottom-up, calling ``rewrite(new, old)`` with the original node
    too (its ``checked_type`` is what the rules need); replacements must have the type of
    the node they replace and are typed like it. This is
    ``passhost.ir.rewrite_post_order(root, rewrite, with_original=True, type_like=True)``,
    kept under this name for existing callers. Returns ``root`` itself when nothing
    changed.
    """
    return rewrite_post_order(root, rewrite, with_original=True, type_like=True)


def _tensor_type(old: Expr, new: Expr, what: str) -> TensorType:
    ty = type_of(old) or type_of(new)
    if type(ty) is not TensorType:
        raise PassError(f"SimplifyInference: the data of {what} has no tensor type ({ty}); "
                        "run InferType before SimplifyInference", "SimplifyInference")
    return ty


# ---------------------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------------------


class BatchNormToInfer(DFPatternCallback):
    """``nn.batch_norm(data, gamma, beta, mean, var)[0]`` -> ``data * scale + shift``."""

    def __init__(self) -> None:
        super().__init__(require_type=True, rewrite_once=True, name="batch_norm_to_infer")
        self.pattern = is_tuple_get_item(is_op("nn.batch_norm")(*(wildcard() for _ in range(5))), 0)

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        call = post.tuple_value
        ty = _tensor_type(pre.tuple_value.args[0], call.args[0], "nn.batch_norm")
        return batch_norm_to_infer(call.attrs, *call.args, ty)


class DropoutToIdentity(DFPatternCallback):
    """``nn.dropout(x)[0]`` -> ``x`` (inference keeps every element)."""

    def __init__(self) -> None:
        super().__init__(rewrite_once=True, name="dropout_to_identity")
        self.pattern = is_tuple_get_item(is_op("nn.dropout")(wildcard()), 0)

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        return post.tuple_value.args[0]


class _NormToInfer(DFPatternCallback):
    """``<op>(data, gamma, beta)`` -> ``unpack(attrs, data, gamma, beta, type of data)``."""

    op_name = ""
    rule_name = ""
    unpack: Callable

    def __init__(self) -> None:
        super().__init__(require_type=True, rewrite_once=True, name=self.rule_name)
        self.pattern = is_op(self.op_name)(wildcard(), wildcard(), wildcard())

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        ty = _tensor_type(pre.args[0], post.args[0], self.op_name)
        return type(self).unpack(post.attrs, *post.args, ty)


class LayerNormToInfer(_NormToInfer):
    """``nn.layer_norm(data, gamma, beta)`` -> normalise over ``axis``, scale, shift."""

    op_name, rule_name, unpack = "nn.layer_norm", "layer_norm_to_infer", layer_norm_to_infer


class InstanceNormToInfer(_NormToInfer):
    """``nn.instance_norm(data, gamma, beta)`` -> normalise over the spatial axes, scale, shift."""

    op_name, rule_name, unpack = "nn.instance_norm", "instance_norm_to_infer", instance_norm_to_infer


_RULES = [BatchNormToInfer(), DropoutToIdentity(), LayerNormToInfer(), InstanceNormToInfer()]


def simplify_inference(expr: Expr) -> Expr:
    """Rewrite the inference-time normalisations of ``expr`` (see the module docstring).

    An untyped ``expr`` is type-inferred first (in place), as the rules need the data's
    rank.

    :returns: the rewritten expression -- ``expr`` itself when there is nothing to rewrite
    :raises PassError: if a rewritten operator's data has no inferred tensor type
    """
    return rewrite(_RULES, expr)


def SimplifyInference():  # noqa: N802 - TVM-style pass constructor
    """Replace ``batch_norm``/``dropout``/``layer_norm``/``instance_norm`` by inference arithmetic."""
    return pattern_pass("SimplifyInference", _RULES, opt_level=0, doc=__doc__)
