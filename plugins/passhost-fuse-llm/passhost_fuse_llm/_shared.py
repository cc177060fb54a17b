"""What the three fusions' rules share: reading constants and comparing dimensions."""
from __future__ import annotations

from typing import Optional

from passhost import ir
from passhost.ir.dims import provably_equal

__all__ = ["scalar", "same", "shape_of", "is_float_tensor"]


def scalar(c: ir.Expr) -> Optional[float]:
    """A one-value float constant as a Python float, shortest-printed at its own precision
    (float32 ``1e-6`` is ``1e-06``), else ``None``."""
    if isinstance(c, ir.Constant) and c.data.size == 1 and c.data.dtype.kind == "f":
        return float(str(c.data.reshape(())))
    return None


def same(a, b) -> bool:
    """Two dimensions equal for every binding of the size variables."""
    if a is ir.ANY or b is ir.ANY:
        return False
    return a == b or (type(a) is not int or type(b) is not int) and provably_equal(a, b)


def shape_of(e: ir.Expr) -> Optional[tuple]:
    """The shape of a typed tensor expression, else ``None``."""
    ty = ir.type_of(e)
    return tuple(ty.shape) if isinstance(ty, ir.TensorType) else None


def is_float_tensor(e: ir.Expr, ndim: Optional[int] = None) -> bool:
    ty = ir.type_of(e)
    return (isinstance(ty, ir.TensorType) and ty.dtype.startswith(("float", "bfloat"))
            and (ndim is None or len(ty.shape) == ndim))
