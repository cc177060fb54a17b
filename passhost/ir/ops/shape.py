"""``shape_value``: symbolic dimensions as an integer tensor (Relax's ``shape_to_tensor`` of a
shape expression).

``shape_of`` of a tensor whose shape holds size variables cannot fold to a constant; it
folds to a ``dims`` call instead, whose value is known up to the size variables and
which shape arithmetic (take, concatenate, add, ...) folds further (see
:func:`passhost.ir.fold_symbolic`)::

    shape_of(%x)                                   /* %x: Tensor[(batch, seq, 768), float32] */
    ->  shape_value(values=[batch, seq, 768], dtype="int64")       /* ty=Tensor[(3), int64] */
    take(shape_value(values=[batch, seq, 768]), 1)  ->  shape_value(values=seq)   /* a scalar: ty=int64 */

``values`` is a list of dimensions (a 1-D result) or one dimension (a 0-D result). The
kernel reads the size variables' values from the interpreter, which binds them from the
arguments of ``@main``.
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError
from ..dims import ANY, Dim
from ..op import OpPattern
from ..types import TensorType, check_dtype
from ._util import kernel, reg

_INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")


def _check(attrs) -> None:
    values = attrs["values"]
    items = values if isinstance(values, tuple) else (values,)
    for v in items:
        if v is ANY:
            raise IRError("operator shape_value: a value cannot be ? (an unknown dimension has no value to compute); "
                          "use shape_of of the tensor instead")
        if type(v) is not int and type(v) is not Dim:
            raise IRError(f"operator shape_value: values must be dimensions (ints, size variables or expressions "
                          f"over them), got {values!r}")
    if attrs["dtype"] not in _INT_DTYPES:
        raise IRError(f"operator shape_value: dtype must be an integer type ({', '.join(_INT_DTYPES)}), "
                      f"got {attrs['dtype']!r}")
    check_dtype(attrs["dtype"])


def _rel(types: list, attrs) -> TensorType:
    values = attrs["values"]
    return TensorType((len(values),) if isinstance(values, tuple) else (), attrs.dtype)


@kernel
def _shape_value(args: list, attrs) -> np.ndarray:
    return np.array(attrs["values"], dtype=attrs["dtype"])


reg("shape_value", 0, _rel, _shape_value, attrs=(("values", ()), ("dtype", "int64")), pattern=OpPattern.OPAQUE,
    attr_check=_check, summary="Dimensions (size-variable expressions) as an integer tensor.")
