"""``einsum``: the Einstein summation of a tuple of tensors (TVM's ``einsum``: one Tuple
argument, the attribute ``equation``, pattern INJECTIVE as TVM registers it).

The equation is numpy's: one comma-separated term of letters per operand, ``...`` for
broadcast leading axes, and after ``->`` the output's letters (without ``->``, the
letters that occur once, in alphabetical order, after the broadcast axes)::

    einsum((%a, %b), equation="bij,bjk->bik")   /* (2, 3, 4), (2, 4, 5) -> (2, 3, 5) */

A letter names one size in every operand (a size of 1 broadcasts against the others, as
numpy allows).
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType, TupleType
from ._util import broadcast_dim, broadcast_shape, kernel, reg

_OP = "einsum"


def _split_term(term: str, ndim: int, equation: str) -> list:
    """The labels of one operand's axes (``None`` for an axis of its ``...``)."""
    if term.count("...") > 1:
        raise TypeInferenceError(f"{_OP}: {equation!r}: a term has more than one '...'")
    if "..." in term:
        pre, post = term.split("...")
        n = ndim - len(pre) - len(post)
        if n < 0:
            raise TypeInferenceError(f"{_OP}: {equation!r}: term {term!r} has more labels than its operand's "
                                     f"{ndim} axes")
        labels = list(pre) + [None] * n + list(post)
    else:
        if len(term) != ndim:
            raise TypeInferenceError(f"{_OP}: {equation!r}: term {term!r} labels {len(term)} axes, its operand "
                                     f"has {ndim}")
        labels = list(term)
    for label in labels:
        if label is not None and not label.isalpha():
            raise TypeInferenceError(f"{_OP}: {equation!r}: {label!r} is not a letter")
    return labels


def _broadcast_all(shapes: list):
    """numpy broadcasting of several shapes (dimensions may be symbolic), ``None`` if they
    provably do not broadcast."""
    out: tuple = ()
    for shape in shapes:
        out = broadcast_shape(out, tuple(shape))
        if out is None:
            return None
    return out


def einsum_shape(equation: str, shapes: list) -> tuple:
    """The output shape of ``einsum`` with ``equation`` on operands of ``shapes``."""
    eq = equation.replace(" ", "")
    inputs, arrow, output = eq.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise TypeInferenceError(f"{_OP}: {equation!r} has {len(terms)} operand term(s), the call has "
                                 f"{len(shapes)} operand(s)")
    sizes: dict = {}
    counts: dict = {}
    broadcast: list = []
    for term, shape in zip(terms, shapes):
        labels = _split_term(term, len(shape), equation)
        broadcast.append(tuple(d for label, d in zip(labels, shape) if label is None))
        for label, d in zip(labels, shape):
            if label is None:
                continue
            counts[label] = counts.get(label, 0) + 1
            have = sizes.get(label)
            if have is None or have == 1:
                sizes[label] = d
            elif d != have and d != 1:
                if type(d) is int and type(have) is int:
                    raise TypeInferenceError(f"{_OP}: {equation!r}: label {label!r} is {have} in one operand and "
                                             f"{d} in another")
                merged = broadcast_dim(have, d)  # symbolic: fails only where provably neither equal nor 1
                if merged is None:
                    raise TypeInferenceError(f"{_OP}: {equation!r}: label {label!r} is {have} in one operand and "
                                             f"{d} in another")
                sizes[label] = merged
    ell = _broadcast_all(broadcast)
    if ell is None:
        text = "[" + ", ".join("(" + ", ".join(map(str, b)) + ("," if len(b) == 1 else "") + ")"
                               for b in broadcast) + "]"
        raise TypeInferenceError(f"{_OP}: {equation!r}: the '...' axes {text} do not broadcast")
    if not arrow:
        return ell + tuple(sizes[label] for label in sorted(label for label, c in counts.items() if c == 1))
    if output.count("...") > 1:
        raise TypeInferenceError(f"{_OP}: {equation!r}: the output has more than one '...'")
    pre, dots, post = output.partition("...")
    for label in pre + post:
        if label not in sizes:
            raise TypeInferenceError(f"{_OP}: {equation!r}: output label {label!r} is in no operand")
        if (pre + post).count(label) > 1:
            raise TypeInferenceError(f"{_OP}: {equation!r}: output label {label!r} occurs twice")
    if not dots and any(broadcast):
        raise TypeInferenceError(f"{_OP}: {equation!r}: the operands' '...' axes are missing from the output")
    return tuple(sizes[label] for label in pre) + (ell if dots else ()) + tuple(sizes[label] for label in post)


def _einsum_rel(types: list, attrs) -> TensorType:
    tt = types[0]
    if type(tt) is not TupleType or not tt.fields:
        raise TypeInferenceError(f"{_OP}: the argument must be a non-empty tuple of tensors, got {tt}")
    fields = list(tt.fields)
    for i, f in enumerate(fields):
        if type(f) is not TensorType:
            raise TypeInferenceError(f"{_OP}: field {i} must be a tensor, got {f}")
        if f.dtype != fields[0].dtype:
            raise TypeInferenceError(f"{_OP}: dtype mismatch between {fields[0]} and {f}")
    return TensorType(einsum_shape(attrs.equation, [f.shape for f in fields]), fields[0].dtype)


@kernel
def _einsum(args: list, attrs) -> np.ndarray:
    parts = args[0]
    return np.asarray(np.einsum(attrs.equation, *parts)).astype(parts[0].dtype, copy=False)


def _check(attrs) -> None:
    if not isinstance(attrs.equation, str) or not attrs.equation:
        raise IRError(f"operator {_OP}: attribute equation must be a non-empty string, got {attrs.equation!r}")


reg(_OP, 1, _einsum_rel, _einsum, attrs=(("equation", None),), pattern=OpPattern.INJECTIVE, attr_check=_check,
    summary="Einstein summation of a tuple of tensors (numpy's equation syntax).")
