"""Symbolic versions of static operator calls, for testing type relations.

:func:`check_relation` takes one operator call with static argument types, replaces the
argument dimensions by size variables (one variable per distinct value ``>= 2``:
``(1, 3, 8, 8)`` becomes ``(1, d3, d8, d8)``), runs the relation again, and checks the
answer against the static one: binding every variable back to its value must give the
static type, dimension for dimension, or ``?`` where the relation could not decide.

    before:  fn (%a0: Tensor[(2, 6), float32]) { reshape(%a0, newshape=[3, -1]) }
             -> Tensor[(3, 4), float32]
    after:   fn (%a0: Tensor[(d2, d6), float32]) { reshape(%a0, newshape=[3, -1]) }
             -> Tensor[(3, floordiv(d2*d6, 3)), float32]      (d2=2, d6=6: (3, 4))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..ir import dims as _dims
from ..ir.types import TensorType, TupleType, Type

__all__ = ["symbolize", "check_relation", "RelationCheck"]


def symbolize(t: Type, names: Optional[dict] = None, keep: tuple = ()) -> Type:
    """``t`` with every dimension ``>= 2`` replaced by the size variable ``d<value>``
    (except the axes in ``keep``)."""
    if type(t) is TupleType:
        return TupleType([symbolize(f, names) for f in t.fields])
    if type(t) is not TensorType:
        return t
    out = []
    for axis, d in enumerate(t.shape):
        if type(d) is int and d >= 2 and axis not in keep:
            var = _dims.size_var(f"d{d}")
            if names is not None:
                names[f"d{d}"] = d
            out.append(var)
        else:
            out.append(d)
    return TensorType(out, t.dtype)


@dataclass
class RelationCheck:
    """The verdict on one call: ``error`` (the relation raised on symbolic input),
    ``wrong`` (a dimension that binds to another value than the static one), and the
    number of dimensions left ``?``."""

    static: Any
    symbolic: Any = None
    error: str = ""
    wrong: list = field(default_factory=list)
    unknown: int = 0

    @property
    def ok(self) -> bool:
        return not self.error and not self.wrong


def _compare(static: Type, sym: Type, values: dict, check: RelationCheck, where: str) -> None:
    if type(static) is TupleType:
        if type(sym) is not TupleType or len(sym.fields) != len(static.fields):
            check.wrong.append(f"{where}: {sym} is not a tuple like {static}")
            return
        for i, (a, b) in enumerate(zip(static.fields, sym.fields)):
            _compare(a, b, values, check, f"{where}.{i}")
        return
    if type(static) is not TensorType:
        if static != sym:
            check.wrong.append(f"{where}: {sym} != {static}")
        return
    if type(sym) is not TensorType or sym.dtype != static.dtype or len(sym.shape) != len(static.shape):
        check.wrong.append(f"{where}: {sym} does not match {static} in rank or dtype")
        return
    for axis, (a, b) in enumerate(zip(static.shape, sym.shape)):
        if b is _dims.ANY:
            check.unknown += 1
            continue
        try:
            bound = _dims.evaluate_dim(b, values)
        except _dims.SymbolicDimError as err:
            check.wrong.append(f"{where}[{axis}]: {b} ({err})")
            continue
        if bound != a:
            check.wrong.append(f"{where}[{axis}]: {b} binds to {bound}, the static relation gives {a}")


#: axes that stay static: ``{op: {argument: axes}}``; a dimension that decides the result's
#: rank (gather_nd's coordinate count, TVM's ``index_rank``) cannot be a size variable
STATIC_AXES = {"gather_nd": {1: (0,)}}


def check_relation(op: Any, arg_types: list, attrs: Any) -> RelationCheck:
    """Run ``op``'s relation on ``arg_types`` and on their symbolic versions; compare."""
    static = op.type_rel(list(arg_types), attrs)
    values: dict = {}
    keep = STATIC_AXES.get(op.name, {})
    sym_types = [symbolize(t, values, keep.get(i, ())) for i, t in enumerate(arg_types)]
    check = RelationCheck(static)
    try:
        check.symbolic = op.type_rel(sym_types, attrs)
    except Exception as err:  # noqa: BLE001 - the verdict names it
        check.error = f"{type(err).__name__}: {err}"
        return check
    _compare(static, check.symbolic, values, check, "result")
    return check
