"""Binding parameter values into a function (TVM's ``bind_params_by_name``).

::

    fn (%x: Tensor[(2), float32], %w: Tensor[(2), float32]) { add(%x, %w) }

    bind_params_by_name(func, {"w": np.ones(2, "float32")})  ->

    fn (%x: Tensor[(2), float32]) { add(%x, meta[relay.Constant][0]) }
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import IRError
from .expr import Constant, Function
from .types import TensorType
from .rewrite import rewrite_post_order

__all__ = ["bind_params_by_name"]


def bind_params_by_name(func: Function, params: Mapping[str, Any]) -> Function:
    """Replace the parameters of ``func`` named in ``params`` by constants.

    Each bound parameter is dropped from the parameter list and every use of it
    becomes one shared :class:`Constant` holding the array. The function keeps its
    other parameters (in order), its return type and its attrs.

    :param func: the function (e.g. ``mod["main"]``)
    :param params: ``{name_hint: array}`` (numpy arrays or anything ``np.asarray`` takes)
    :returns: a new function (``func`` itself when ``params`` is empty)
    :raises IRError: when a name matches no parameter, when several parameters share
        a name that is bound, or when an array contradicts the parameter's annotation
    """
    if not isinstance(func, Function):
        raise IRError(f"bind_params_by_name needs a Function, got {type(func).__name__}; "
                      "pass mod['main'] rather than the module")
    if not params:
        return func
    by_name: dict = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, []).append(p)
    memo: dict = {}
    for name, value in params.items():
        found = by_name.get(name)
        if not found:
            names = ", ".join("%" + p.name_hint for p in func.params) or "none"
            raise IRError(f"cannot bind parameter {name!r}: the function has no parameter of that "
                          f"name (its parameters: {names})")
        if len(found) > 1:
            raise IRError(f"cannot bind parameter {name!r}: {len(found)} parameters of the function "
                          "are called that; rename them so each bound name is unique")
        var = found[0]
        const = value if isinstance(value, Constant) else Constant(np.asarray(value))
        ann = var.type_annotation
        if isinstance(ann, TensorType):
            arr = const.data
            if arr.shape != ann.shape or arr.dtype.name != ann.dtype:
                raise IRError(f"cannot bind parameter %{name}: it is annotated {ann} but the value has "
                              f"shape {arr.shape} and dtype {arr.dtype.name}; pass an array of that "
                              "shape and dtype")
        memo[var] = const
    new_params = [p for p in func.params if p not in memo]
    body = rewrite_post_order(func.body, None, memo=dict(memo))
    return Function(new_params, body, func.ret_type, func.attrs)
