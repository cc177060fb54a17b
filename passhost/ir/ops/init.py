"""Tensor creation: ``full zeros ones full_like zeros_like ones_like`` (pattern ELEMWISE, as TVM).

``full(fill_value)`` takes the value as a scalar tensor argument and the shape and dtype
as attributes (TVM's ``InitOpAttrs``; an empty dtype means the fill value's; the shape's
entries are ints or dimensions such as ``batch`` or ``seq + 1``, never ``?``);
``zeros``/``ones`` take no argument. The ``*_like`` forms copy shape and dtype from
their first argument (``full_like`` casts its scalar fill value to that dtype)::

    zeros(shape=[2, 3], dtype="float32")     /* ty=Tensor[(2, 3), float32] */
    full_like(%x, 1.5f)                      /* ty of %x */
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, check_dtype
from ._util import check_dims_attr, kernel, reg, tensor_arg

E = OpPattern.ELEMWISE


def _scalar(op: str, types: list, i: int) -> TensorType:
    t = tensor_arg(op, types, i, "the fill value")
    if t.ndim != 0:
        raise TypeInferenceError(f"{op}: the fill value must be a scalar, got {t}")
    return t


def _full_rel(types: list, attrs) -> TensorType:
    fill = _scalar("full", types, 0)
    return TensorType(tuple(attrs.shape), attrs.dtype or fill.dtype)


@kernel
def _full(args: list, attrs) -> np.ndarray:
    fill = args[0]
    return np.full(tuple(attrs.shape), fill, dtype=attrs.dtype or fill.dtype)


def _const_rel(types: list, attrs) -> TensorType:
    return TensorType(tuple(attrs.shape), attrs.dtype)


def _filled(value: int):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        return np.full(tuple(attrs.shape), value, dtype=attrs.dtype)

    return run


def _check_init(op: str, need_dtype: bool):
    def check(attrs) -> None:
        check_dims_attr(op, "shape", attrs.shape,
                        f"operator {op}: attribute shape must be a list of non-negative ints, got {{v}}")
        if attrs.dtype or need_dtype:
            try:
                check_dtype(attrs.dtype)
            except IRError as err:
                raise IRError(f"operator {op}: attribute dtype: {err}") from None

    return check


_INIT_ATTRS = (("shape", None), ("dtype", ""))

reg("full", 1, _full_rel, _full, attrs=_INIT_ATTRS, pattern=E, attr_check=_check_init("full", False),
    summary="A tensor of the given shape filled with a scalar value.")
reg("zeros", 0, _const_rel, _filled(0), attrs=_INIT_ATTRS, pattern=E, attr_check=_check_init("zeros", True),
    summary="A tensor of zeros of the given shape and dtype.")
reg("ones", 0, _const_rel, _filled(1), attrs=_INIT_ATTRS, pattern=E, attr_check=_check_init("ones", True),
    summary="A tensor of ones of the given shape and dtype.")


def _like_rel(op: str, nargs: int):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        if nargs == 2:
            _scalar(op, types, 1)
        return data

    rel.__name__ = f"{op}_rel"
    return rel


@kernel
def _full_like(args: list, attrs) -> np.ndarray:
    x, fill = args
    return np.full(x.shape, fill, dtype=x.dtype)


def _like(value: int):
    @kernel
    def run(args: list, attrs) -> np.ndarray:
        return np.full(args[0].shape, value, dtype=args[0].dtype)

    return run


reg("full_like", 2, _like_rel("full_like", 2), _full_like, pattern=E,
    summary="A tensor shaped and typed like the data, filled with a scalar value.")
reg("zeros_like", 1, _like_rel("zeros_like", 1), _like(0), pattern=E,
    summary="Zeros shaped and typed like the data.")
reg("ones_like", 1, _like_rel("ones_like", 1), _like(1), pattern=E,
    summary="Ones shaped and typed like the data.")
