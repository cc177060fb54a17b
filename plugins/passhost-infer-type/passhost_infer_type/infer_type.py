"""InferType: type inference over every function of a module.

A thin pass over the host's inference engine, :func:`passhost.ir.infer_type` (TVM's
``relay.transform.InferType``): every expression gets its ``checked_type``, untyped
parameters get their type annotation filled in and functions their return type, so the
module prints with ``/* ty=... */`` comments. Nodes that are already typed are not
inferred again, which makes the InferType that follows every function pass cheap.

Before::

    def @main(%x: Tensor[(10, 20), float32]) {
      add(%x, 1f)
    }

After ``InferType()``::

    def @main(%x: Tensor[(10, 20), float32] /* ty=Tensor[(10, 20), float32] */) -> Tensor[(10, 20), float32] {
      add(%x, 1f /* ty=float32 */) /* ty=Tensor[(10, 20), float32] */
    }
"""
from __future__ import annotations

from typing import Any

from passhost import ir
from passhost.ir import IRModule
from passhost.transform import module_pass

__all__ = ["infer_type", "InferType"]


def infer_type(mod: IRModule) -> IRModule:
    """Type every function of ``mod``; returns the typed module.

    :raises passhost.errors.TypeInferenceError: naming the operator and the mismatch
    """
    return ir.infer_type(mod)


@module_pass(opt_level=0, name="InferType", preserves_types=True)
class InferType:
    """Infer the type of every expression (fills ``checked_type``, annotations, return types).

    Module pass, ``opt_level`` 0. Before / after::

        def @main(%x: Tensor[(2), float32]) {   |  def @main(%x: Tensor[(2), float32] /* ty=Tensor[(2), float32] */) -> Tensor[(2), float32] {
          negative(%x)                          |    negative(%x) /* ty=Tensor[(2), float32] */
        }                                       |  }
    """

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return infer_type(mod)
