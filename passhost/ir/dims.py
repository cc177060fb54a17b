"""Symbolic dimensions: size variables, integer expressions over them, and ``?``.

A tensor type's shape holds ints and :class:`Dim` objects::

    Tensor[(batch, seq, 768), float32]           # two size variables
    Tensor[(batch, past + seq, 64), float32]     # an expression
    Tensor[(batch*seq, floordiv(seq, 2)), int64] # products, floor division by a constant
    Tensor[(?, 3), float32]                      # ? : unknown (TVM's relay.Any)

A :class:`Dim` is kept in one canonical form: a polynomial with integer coefficients
over *atoms*, where an atom is a size variable, ``floordiv(e, c)``, ``floormod(e, c)``
(``c`` a positive constant), ``min(a, b)`` or ``max(a, b)``. So ``batch*seq`` and
``seq*batch`` are the same object value (equal, with one hash and one text), and
arithmetic that cancels gives back an int: ``(seq + 1) - seq == 1``. Arithmetic is
Python's: ``+ - *``, ``//`` and ``%`` (floor division and modulo, as ONNX and numpy).

Size variables range over the non-negative integers. A question that the canonical form
and those bounds cannot answer is never guessed:

* ``==`` is structural (``batch == seq`` is False; use :func:`provably_equal` /
  :func:`provably_unequal` to reason);
* ``<``, ``<=``, ``>``, ``>=`` and ``bool()`` answer when the bounds decide, and raise
  :class:`UndecidableDim` otherwise;
* ``int()`` of a symbolic dimension raises :class:`SymbolicDimError`;
* ``?`` (:data:`ANY`) absorbs arithmetic (``? + 1`` is ``?``; ``? * 0`` is ``0``).

Every ``?`` is equal to every other for the comparison of *types* (so a printed type reads
back equal), but no two are :func:`provably_equal`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Union

from ..errors import TypeInferenceError

__all__ = [
    "Dim", "AnyDim", "ANY", "DimLike", "size_var", "is_dim", "is_static", "is_symbolic_dim", "has_any",
    "free_size_vars", "substitute", "evaluate_dim", "provably_equal", "provably_unequal", "dmin", "dmax",
    "floordiv", "floormod", "parse_dim", "dim_text", "SymbolicDimError", "UndecidableDim",
    "value_has_dims", "substitute_value", "bind_shape", "broadcast_dim",
]


class SymbolicDimError(TypeInferenceError):
    """A symbolic dimension was used where a concrete int is needed (``int(batch)``)."""


class UndecidableDim(TypeInferenceError):
    """A comparison of symbolic dimensions that their bounds cannot decide."""


_set = object.__setattr__
_INF = math.inf


class AnyDim:
    """``?``: a dimension nothing is known about (TVM's ``relay.Any()``); use :data:`ANY`."""

    __slots__ = ()
    _instance: Optional["AnyDim"] = None

    def __new__(cls) -> "AnyDim":
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"

    def __str__(self) -> str:
        return "?"

    def __reduce__(self):
        return (AnyDim, ())

    def __hash__(self) -> int:
        return 0x3F3F

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    def __add__(self, other: Any) -> "AnyDim":
        return self

    __radd__ = __sub__ = __rsub__ = __add__

    def __mul__(self, other: Any) -> Any:
        return 0 if type(other) is int and other == 0 else self

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        return self

    def __rfloordiv__(self, other: Any) -> Any:
        return 0 if type(other) is int and other == 0 else self

    __mod__ = __floordiv__
    __rmod__ = __rfloordiv__

    def __neg__(self) -> "AnyDim":
        return self

    def __int__(self) -> int:
        raise SymbolicDimError("dimension ? is unknown: it has no integer value")

    __index__ = __int__

    def __bool__(self) -> bool:
        raise UndecidableDim("whether dimension ? is zero is not known")

    def _undecidable(self, other: Any) -> bool:
        raise UndecidableDim(f"cannot compare dimension ? with {other}: ? is unknown")

    __lt__ = __le__ = __gt__ = __ge__ = _undecidable


#: the unknown dimension, printed ``?``
ANY = AnyDim()


def _atom_key(atom: Any) -> tuple:
    if type(atom) is str:
        return (0, atom)
    return (1, _text_of_atom(atom))


class Dim:
    """A symbolic dimension: a canonical integer polynomial over size variables and
    ``floordiv``/``floormod``/``min``/``max`` atoms. Build with :func:`size_var` and
    arithmetic; a result that is constant is a plain ``int``.

    >>> n, m = size_var("n"), size_var("m")
    >>> str(m * n + 2 * n - 1)
    'm*n + 2*n - 1'
    >>> (n + 1) * 2 // 2 - n
    1
    """

    __slots__ = ("terms", "_hash", "_text")

    def __init__(self, terms: tuple) -> None:
        _set(self, "terms", terms)
        _set(self, "_hash", hash(terms))
        _set(self, "_text", None)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Dim is immutable")

    def __reduce__(self):
        return (_from_terms, (self.terms,))

    # -- identity --------------------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Dim:
            return False
        return self._hash == other._hash and self.terms == other.terms  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    @property
    def name(self) -> Optional[str]:
        """The variable's name if this is a bare size variable, else ``None``."""
        t = self.terms
        if len(t) == 1 and t[0][1] == 1 and len(t[0][0]) == 1 and type(t[0][0][0]) is str:
            return t[0][0][0]
        return None

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = _render(self.terms)
            _set(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"Dim({str(self)!r})"

    # -- arithmetic ------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        return _add(self, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return _add(self, _neg(other))

    def __rsub__(self, other: Any) -> Any:
        return _add(other, _neg(self))

    def __mul__(self, other: Any) -> Any:
        return _mul(self, other)

    __rmul__ = __mul__

    def __neg__(self) -> Any:
        return _neg(self)

    def __floordiv__(self, other: Any) -> Any:
        return floordiv(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return floordiv(other, self)

    def __mod__(self, other: Any) -> Any:
        return floormod(self, other)

    def __rmod__(self, other: Any) -> Any:
        return floormod(other, self)

    # -- questions that need a value -------------------------------------------------
    def __int__(self) -> int:
        raise SymbolicDimError(f"dimension {self} is symbolic: it has no integer value until "
                               "its size variables are bound")

    __index__ = __int__

    def __bool__(self) -> bool:
        lo, hi = _bounds(self)
        if lo > 0 or hi < 0:
            return True
        raise UndecidableDim(f"whether dimension {self} is zero depends on its size variables")

    def __lt__(self, other: Any) -> bool:
        return _compare(self, other, "<")

    def __le__(self, other: Any) -> bool:
        return _compare(self, other, "<=")

    def __gt__(self, other: Any) -> bool:
        return _compare(self, other, ">")

    def __ge__(self, other: Any) -> bool:
        return _compare(self, other, ">=")


DimLike = Union[int, Dim, AnyDim]


def _from_terms(terms: tuple) -> Any:
    if not terms:
        return 0
    if len(terms) == 1 and terms[0][0] == ():
        return terms[0][1]
    return Dim(terms)


def _sort_key(term: tuple) -> tuple:
    mono = term[0]
    return (-len(mono), [_atom_key(a) for a in mono])


def _make(poly: dict) -> Any:
    """A canonical Dim (or int) from ``{monomial: coeff}``."""
    items = [(m, c) for m, c in poly.items() if c]
    items.sort(key=_sort_key)
    return _from_terms(tuple(items))


def _poly(x: Any) -> dict:
    if type(x) is Dim:
        return dict(x.terms)
    x = int(x)
    return {(): x} if x else {}


def _is_num(x: Any) -> bool:
    return type(x) is int or (isinstance(x, int) and not isinstance(x, bool))


def _coerce(x: Any) -> Any:
    """An int, Dim or ANY from an int-like value (numpy ints included)."""
    if type(x) is int or type(x) is Dim or x is ANY:
        return x
    if isinstance(x, bool):
        raise TypeError(f"a dimension cannot be a bool ({x!r})")
    if hasattr(x, "__index__"):
        return int(x.__index__())
    raise TypeError(f"not a dimension: {x!r}")


#: results of ``+`` and ``*`` on a Dim and an int or Dim, by operands: type relations
#: ask the same few sums and products over and over (a reshape's element counts, a
#: broadcast's checks), and building a canonical form costs a sort and a few dicts.
#: Operands are immutable and compare by value; the tables stop growing at _MEMO_MAX.
_ADD_MEMO: dict = {}
_MUL_MEMO: dict = {}
#: the same for ``min``/``max`` (by kind and operands) and for a Dim's bounds: a slice's
#: type relation clamps each symbolic bound with both and compares the bounds
_MINMAX_MEMO: dict = {}
_BOUNDS_MEMO: dict = {}
_MEMO_MAX = 1 << 14


def _add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if (ta is Dim and (tb is int or tb is Dim)) or (tb is Dim and ta is int):
        key = (a, b)
        out = _ADD_MEMO.get(key)
        if out is None:
            out = _add_new(a, b)
            if len(_ADD_MEMO) < _MEMO_MAX:
                _ADD_MEMO[key] = out
        return out
    return _add_new(a, b)


def _add_new(a: Any, b: Any) -> Any:
    a, b = _coerce(a), _coerce(b)
    if a is ANY or b is ANY:
        return ANY
    if type(a) is int and type(b) is int:
        return a + b
    p = _poly(a)
    for m, c in _poly(b).items():
        p[m] = p.get(m, 0) + c
    _join_min_max(p)
    return _make(p)


def _join_min_max(p: dict) -> None:
    """``c*min(x, y) + c*max(x, y)`` is ``c*x + c*y`` (in place). A roll's two slices give
    ``min(1, n) + max(0, n - 1)``, that is ``min(1, n) + max(1, n) - 1``: ``n``."""
    for m in [m for m in p if len(m) == 1 and type(m[0]) is tuple and m[0][0] == "min"]:
        other = (("max",) + m[0][1:],)
        c = p.get(m, 0)
        if c and p.get(other) == c:
            del p[m], p[other]
            for part in m[0][1:]:
                for mono, k in _poly(part).items():
                    p[mono] = p.get(mono, 0) + c * k


def _neg(a: Any) -> Any:
    a = _coerce(a)
    if a is ANY:
        return ANY
    if type(a) is int:
        return -a
    return _from_terms(tuple((m, -c) for m, c in a.terms))


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    if not m1:
        return m2
    if not m2:
        return m1
    return tuple(sorted(m1 + m2, key=_atom_key))


def _mul(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if (ta is Dim and (tb is int or tb is Dim)) or (tb is Dim and ta is int):
        key = (a, b)
        out = _MUL_MEMO.get(key)
        if out is None:
            out = _mul_new(a, b)
            if len(_MUL_MEMO) < _MEMO_MAX:
                _MUL_MEMO[key] = out
        return out
    return _mul_new(a, b)


def _mul_new(a: Any, b: Any) -> Any:
    a, b = _coerce(a), _coerce(b)
    if type(a) is int and type(b) is int:
        return a * b
    if a is ANY or b is ANY:
        return 0 if (a == 0 or b == 0) else ANY
    if type(b) is int:
        return _make({m: c * b for m, c in a.terms}) if b else 0
    if type(a) is int:
        return _make({m: c * a for m, c in b.terms}) if a else 0
    p: dict = {}
    for m1, c1 in _poly(a).items():
        for m2, c2 in _poly(b).items():
            m = _mono_mul(m1, m2)
            p[m] = p.get(m, 0) + c1 * c2
    return _make(p)


def _atom(kind: str, *args: Any) -> Dim:
    atom = (kind,) + args
    return Dim((((atom,), 1),))


def floordiv(a: Any, b: Any) -> Any:
    """``a // b`` (floor division) in canonical form: exact where the division is exact
    (``(2*n + 4) // 2`` is ``n + 2``), otherwise whole multiples are taken out and the rest
    becomes a ``floordiv`` atom (``(3*n + 1) // 2`` is ``n + floordiv(n + 1, 2)``)."""
    a, b = _coerce(a), _coerce(b)
    if type(a) is int and type(b) is int:
        if b == 0:
            raise TypeInferenceError("division of a dimension by zero")
        return a // b
    if a is ANY or b is ANY:
        return ANY
    if type(b) is Dim:
        return _div_by_dim(a, b)
    if b == 0:
        raise TypeInferenceError(f"division of dimension {a} by zero")
    if b < 0:
        return floordiv(_neg(a), -b)
    if b == 1:
        return a
    whole: dict = {}
    rest: dict = {}
    for m, c in a.terms:
        q, r = divmod(c, b)
        if q:
            whole[m] = q
        if r:
            rest[m] = r
    if not rest:
        return _make(whole)
    rest_dim = _make(rest)
    if type(rest_dim) is int:
        return _add(_make(whole), rest_dim // b)
    # floordiv(floordiv(e, c1), c2) == floordiv(e, c1*c2)
    t = rest_dim.terms
    if len(t) == 1 and t[0][1] == 1 and len(t[0][0]) == 1 and type(t[0][0][0]) is tuple \
            and t[0][0][0][0] == "floordiv":
        inner = t[0][0][0]
        return _add(_make(whole), floordiv(inner[1], inner[2] * b))
    lo, hi = _bounds(rest_dim)
    if 0 <= lo and hi < b:
        return _make(whole)
    return _add(_make(whole), _atom("floordiv", rest_dim, b))


def _div_by_dim(a: Any, b: Dim) -> Any:
    """``a // b`` for a symbolic ``b``: exact division by a monomial, or ``?``."""
    if a == b:
        return 1
    if len(b.terms) != 1:
        return ANY
    (bm, bc), = b.terms
    if type(a) is int:
        return ANY
    out: dict = {}
    for m, c in a.terms:
        rest = list(m)
        for atom in bm:
            if atom not in rest:
                return ANY
            rest.remove(atom)
        if c % bc:
            return ANY
        out[tuple(rest)] = c // bc
    return _make(out)


def floormod(a: Any, b: Any) -> Any:
    """``a % b`` with the sign of ``b`` (floor modulo), ``b`` a positive constant; a
    symbolic or negative ``b`` gives ``?`` unless the division is exact."""
    a, b = _coerce(a), _coerce(b)
    if type(a) is int and type(b) is int:
        if b == 0:
            raise TypeInferenceError("modulo of a dimension by zero")
        return a % b
    if a is ANY or b is ANY:
        return ANY
    if type(b) is Dim:
        q = _div_by_dim(a, b)
        return 0 if q is not ANY and type(a) is Dim and _mul(q, b) == a else ANY
    if b == 0:
        raise TypeInferenceError(f"modulo of dimension {a} by zero")
    if b < 0:
        return ANY
    if b == 1:
        return 0
    rest = {m: c % b for m, c in a.terms if c % b}
    rest_dim = _make(rest)
    if type(rest_dim) is int:
        return rest_dim % b
    lo, hi = _bounds(rest_dim)
    if 0 <= lo and hi < b:
        return rest_dim
    return _atom("floormod", rest_dim, b)


def dmin(a: Any, b: Any) -> Any:
    """``min(a, b)``: decided by bounds where they can, otherwise a ``min`` atom."""
    return _minmax("min", a, b)


def dmax(a: Any, b: Any) -> Any:
    """``max(a, b)``: decided by bounds where they can, otherwise a ``max`` atom."""
    return _minmax("max", a, b)


def _minmax(kind: str, a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if (ta is Dim and (tb is int or tb is Dim)) or (tb is Dim and ta is int):
        key = (kind, a, b)
        out = _MINMAX_MEMO.get(key)
        if out is None:
            out = _minmax_new(kind, a, b)
            if len(_MINMAX_MEMO) < _MEMO_MAX:
                _MINMAX_MEMO[key] = out
        return out
    return _minmax_new(kind, a, b)


def _minmax_new(kind: str, a: Any, b: Any) -> Any:
    a, b = _coerce(a), _coerce(b)
    if type(a) is int and type(b) is int:
        return min(a, b) if kind == "min" else max(a, b)
    if a is ANY or b is ANY:
        return ANY
    if a == b:
        return a
    lo, hi = _bounds(_add(a, _neg(b)))
    if hi <= 0:
        return a if kind == "min" else b
    if lo >= 0:
        return b if kind == "min" else a
    if type(a) is int or type(b) is int:  # max(c, n + k) is max(c - k, n) + k: one form for each
        k = _poly(b if type(a) is int else a).get((), 0)
        if k:
            return _add(_minmax(kind, _add(a, -k), _add(b, -k)), k)
    x, y = sorted((a, b), key=lambda d: str(d))
    return _atom(kind, x, y)


# -- bounds --------------------------------------------------------------------------
def _atom_bounds(atom: Any) -> tuple:
    if type(atom) is str:
        return (0, _INF)
    kind = atom[0]
    if kind == "floormod":
        return (0, atom[2] - 1)
    if kind == "floordiv":
        lo, hi = _bounds(atom[1])
        c = atom[2]
        return (math.floor(lo / c) if lo != -_INF else -_INF, math.floor(hi / c) if hi != _INF else _INF)
    la, ha = _bounds(atom[1])
    lb, hb = _bounds(atom[2])
    if kind == "min":
        return (min(la, lb), min(ha, hb))
    return (max(la, lb), max(ha, hb))


def _mul_bounds(x: tuple, y: tuple) -> tuple:
    products = []
    for p in x:
        for q in y:
            if (p == 0 and q in (_INF, -_INF)) or (q == 0 and p in (_INF, -_INF)):
                products.append(0)
            else:
                products.append(p * q)
    return (min(products), max(products))


def _bounds(d: Any, depth: int = 0) -> tuple:
    """``(lo, hi)`` with size variables in [0, inf); ``math.inf`` for unbounded.

    A ``min``/``max`` term is bounded by its arguments too, each substituted for it, so that
    ``max(10, n) - n`` is at least 0 (``n - n``) and ``n - min(n, 4)`` too."""
    if type(d) is Dim and depth == 0:
        out = _BOUNDS_MEMO.get(d)
        if out is None:
            out = _bounds_new(d, 0)
            if len(_BOUNDS_MEMO) < _MEMO_MAX:
                _BOUNDS_MEMO[d] = out
        return out
    return _bounds_new(d, depth)


def _bounds_new(d: Any, depth: int) -> tuple:
    if type(d) is int:
        return (d, d)
    if d is ANY:
        return (-_INF, _INF)
    lo = hi = 0
    for mono, c in d.terms:
        mb: tuple = (1, 1)
        for atom in mono:
            mb = _mul_bounds(mb, _atom_bounds(atom))
        tb = _mul_bounds(mb, (c, c))
        lo, hi = lo + tb[0], hi + tb[1]
    if depth < 2 and len(d.terms) > 1:
        for i, (mono, c) in enumerate(d.terms):
            if len(mono) != 1 or type(mono[0]) is not tuple or mono[0][0] not in ("min", "max"):
                continue
            kind, a, b = mono[0]
            # c * max(a, b) >= c * a and >= c * b when c > 0 (so does c * min(a, b) when c < 0);
            # c * min(a, b) <= both when c > 0 (so does c * max(a, b) when c < 0)
            rest = _from_terms(d.terms[:i] + d.terms[i + 1:])
            subs = [_bounds(_add(rest, _mul(arg, c)), depth + 1) for arg in (a, b)]
            if (kind == "max") == (c > 0):
                lo = max(lo, max(s[0] for s in subs))
            else:
                hi = min(hi, min(s[1] for s in subs))
    return (lo, hi)


def _compare(a: Any, b: Any, op: str) -> bool:
    diff = _add(a, _neg(b))
    if type(diff) is int:
        return {"<": diff < 0, "<=": diff <= 0, ">": diff > 0, ">=": diff >= 0}[op]
    lo, hi = _bounds(diff)
    verdict = {"<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0),
               ">": (lo > 0, hi <= 0), ">=": (lo >= 0, hi < 0)}[op]
    if verdict[0]:
        return True
    if verdict[1]:
        return False
    raise UndecidableDim(f"whether {a} {op} {b} depends on the size variables "
                         f"({', '.join(sorted(free_size_vars(diff)))})")


# -- questions -----------------------------------------------------------------------
def is_dim(x: Any) -> bool:
    """Whether ``x`` is a dimension: an int (not a bool), a :class:`Dim` or ``?``."""
    return type(x) is int or type(x) is Dim or x is ANY


def is_symbolic_dim(x: Any) -> bool:
    """Whether ``x`` is a :class:`Dim` or ``?`` (not a plain int)."""
    return type(x) is Dim or x is ANY


def is_static(shape: Any) -> bool:
    """Whether every entry of ``shape`` is a plain int."""
    for d in shape:
        if type(d) is not int:
            return False
    return True


def has_any(shape: Any) -> bool:
    """Whether ``shape`` holds a ``?``."""
    return any(d is ANY for d in shape)


def provably_equal(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same integer for every binding (``?`` is never equal)."""
    if a is ANY or b is ANY:
        return False
    return a == b


def provably_unequal(a: Any, b: Any) -> bool:
    """``a`` and ``b`` differ for every binding (e.g. ``3`` and ``4``, ``n`` and ``n + 1``)."""
    if a is ANY or b is ANY:
        return False
    diff = _add(a, _neg(b))
    if type(diff) is int:
        return diff != 0
    lo, hi = _bounds(diff)
    return lo > 0 or hi < 0


def _atom_vars(atom: Any, out: set) -> None:
    if type(atom) is str:
        out.add(atom)
        return
    for part in atom[1:]:
        if type(part) is Dim:
            for mono, _ in part.terms:
                for a in mono:
                    _atom_vars(a, out)


def free_size_vars(x: Any) -> set:
    """Names of the size variables in a dimension, or in a shape (an iterable of them)."""
    out: set = set()
    items = [x] if (type(x) is Dim or type(x) is int or x is ANY) else list(x)
    for d in items:
        if type(d) is Dim:
            for mono, _ in d.terms:
                for a in mono:
                    _atom_vars(a, out)
    return out


def substitute(d: Any, values: Mapping[str, Any]) -> Any:
    """``d`` with size variables replaced by ``values`` (ints or dimensions)."""
    if type(d) is not Dim:
        return d
    total: Any = 0
    for mono, c in d.terms:
        term: Any = c
        for atom in mono:
            term = _mul(term, _subst_atom(atom, values))
        total = _add(total, term)
    return total


def _subst_atom(atom: Any, values: Mapping[str, Any]) -> Any:
    if type(atom) is str:
        v = values.get(atom)
        return _var(atom) if v is None else v
    kind = atom[0]
    if kind == "floordiv":
        return floordiv(substitute(atom[1], values), atom[2])
    if kind == "floormod":
        return floormod(substitute(atom[1], values), atom[2])
    return _minmax(kind, substitute(atom[1], values), substitute(atom[2], values))


def evaluate_dim(d: Any, values: Mapping[str, int]) -> int:
    """The int value of ``d`` given every size variable's value.

    :raises SymbolicDimError: a variable of ``d`` has no value (or ``d`` is ``?``)
    """
    if type(d) is int:
        return d
    if d is ANY:
        raise SymbolicDimError("dimension ? has no value")
    out = substitute(d, values)
    if type(out) is not int:
        missing = sorted(free_size_vars(out))
        raise SymbolicDimError(f"dimension {d} needs a value for {', '.join(missing)}")
    return out


# -- names and text ------------------------------------------------------------------
_VARS: dict = {}


def _var(name: str) -> Dim:
    d = _VARS.get(name)
    if d is None:
        d = Dim((((name,), 1),))
        if len(_VARS) < 65536:
            _VARS[name] = d
    return d


def size_var(name: str) -> Dim:
    """The size variable ``name`` (an identifier: letters, digits, ``_``; not a digit first).

    >>> str(size_var("batch") * 2)
    '2*batch'
    """
    if not isinstance(name, str) or not name or not (name[0].isalpha() or name[0] == "_") \
            or not all(ch.isalnum() or ch == "_" for ch in name) or name in _RESERVED:
        raise TypeInferenceError(f"size variable name {name!r} is not an identifier (letters, digits and _, "
                                 "not starting with a digit)")
    return _var(name)


_RESERVED = frozenset({"floordiv", "floormod", "min", "max", "Tensor", "fn", "True", "False", "None"})


def _text_of_atom(atom: Any) -> str:
    if type(atom) is str:
        return atom
    return f"{atom[0]}({atom[1]}, {atom[2]})"


def _render(terms: tuple) -> str:
    out = []
    for i, (mono, c) in enumerate(terms):
        body = "*".join(_text_of_atom(a) for a in mono)
        mag = abs(c)
        if not mono:
            piece = str(mag)
        elif mag == 1:
            piece = body
        else:
            piece = f"{mag}*{body}"
        if i == 0:
            out.append(("-" if c < 0 else "") + piece)
        else:
            out.append((" - " if c < 0 else " + ") + piece)
    return "".join(out)


def dim_text(d: Any) -> str:
    """The printed form of a dimension: ``768``, ``batch``, ``seq + 1``, ``?``."""
    return str(d)


# -- parsing -------------------------------------------------------------------------
def parse_dim(text: str, make_var: Optional[Callable[[str], Any]] = None) -> Any:
    """Read a dimension written as it prints (``batch``, ``2*seq + 1``, ``floordiv(n, 2)``,
    ``?``); ``make_var(name)`` maps names (default :func:`size_var`).

    :raises ValueError: the text is not a dimension expression
    """
    tokens = _tokenize(text)
    reader = _DimReader(tokens, make_var or size_var)
    value = reader.expr()
    if reader.i != len(tokens):
        raise ValueError(f"unexpected {tokens[reader.i]!r} in dimension {text!r}")
    return value


def _tokenize(text: str) -> list:
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit():
            j = i
            while j < n and text[j].isdigit():
                j += 1
            out.append(text[i:j])
            i = j
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(text[i:j])
            i = j
        elif ch in "+-*(),?/%":
            if text.startswith("//", i):
                out.append("//")
                i += 2
            else:
                out.append(ch)
                i += 1
        else:
            raise ValueError(f"unexpected {ch!r} in dimension {text!r}")
    return out


class _DimReader:
    """Recursive descent over a token list: expr := term (('+'|'-') term)*;
    term := unary (('*'|'//'|'%') unary)*; unary := '-' unary | atom."""

    def __init__(self, tokens: list, make_var: Callable[[str], Any]) -> None:
        self.toks = tokens
        self.i = 0
        self.make_var = make_var
        self.depth = 0

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self, tok: str) -> None:
        if self.peek() != tok:
            raise ValueError(f"expected {tok!r}, found {self.peek() or 'the end'!r}")
        self.i += 1

    def expr(self) -> Any:
        self.depth += 1
        if self.depth > 100:
            raise ValueError("dimension expression nested too deeply")
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.peek()
            self.i += 1
            rhs = self.term()
            value = _add(value, rhs if op == "+" else _neg(rhs))
        self.depth -= 1
        return value

    def term(self) -> Any:
        value = self.unary()
        while self.peek() in ("*", "//", "%", "/"):
            op = self.peek()
            self.i += 1
            rhs = self.unary()
            value = _mul(value, rhs) if op == "*" else floormod(value, rhs) if op == "%" else floordiv(value, rhs)
        return value

    def unary(self) -> Any:
        tok = self.peek()
        if tok == "-":
            self.i += 1
            return _neg(self.unary())
        self.i += 1
        if tok == "?":
            return ANY
        if tok.isdigit():
            return int(tok)
        if tok == "(":
            value = self.expr()
            self.take(")")
            return value
        if tok in ("floordiv", "floormod", "min", "max") and self.peek() == "(":
            self.i += 1
            a = self.expr()
            self.take(",")
            b = self.expr()
            self.take(")")
            return {"floordiv": floordiv, "floormod": floormod, "min": dmin, "max": dmax}[tok](a, b)
        if tok and (tok[0].isalpha() or tok[0] == "_"):
            return self.make_var(tok)
        raise ValueError(f"expected a dimension, found {tok or 'the end'!r}")


def broadcast_dim(a: Any, b: Any) -> Any:
    """numpy broadcasting of two dimensions at least one of which is symbolic: the one
    that is not 1 when the other may be 1 or equal (``n`` and ``5`` give ``5``), ``?`` when
    it depends on the size variables (``n`` and ``m``), ``None`` when they provably do not
    broadcast (``n + 6`` and ``5``)."""
    if a == b and a is not ANY:
        return a
    if b == 1:
        return a
    if a == 1:
        return b
    a_one, b_one = not provably_unequal(a, 1), not provably_unequal(b, 1)
    if type(b) is int or (not b_one and a is not ANY):
        if a_one or not provably_unequal(a, b):
            return b
        return None
    if type(a) is int or not a_one:
        if b_one or not provably_unequal(a, b):
            return a
        return None
    return ANY


# -- attribute values ----------------------------------------------------------------
def value_has_dims(value: Any) -> bool:
    """Whether an attribute value (an int, a tuple of them, nested) holds a :class:`Dim`
    or ``?``."""
    if type(value) is Dim or value is ANY:
        return True
    if type(value) is tuple or type(value) is list:
        for v in value:
            if type(v) is Dim or v is ANY or ((type(v) is tuple or type(v) is list) and value_has_dims(v)):
                return True
    return False


def substitute_value(value: Any, values: Mapping[str, int]) -> Any:
    """An attribute value with every :class:`Dim` evaluated under ``values`` (tuples stay
    tuples; a ``?`` stays, for the kernel to refuse if it needs it); raises
    :class:`SymbolicDimError` for a variable without a value."""
    if value is ANY:
        return value
    if type(value) is Dim:
        return evaluate_dim(value, values)
    if type(value) is tuple or type(value) is list:
        return tuple(substitute_value(v, values) for v in value)
    return value


def bind_shape(shape: tuple, actual: tuple, values: dict, where: str) -> Optional[str]:
    """Match a type's ``shape`` against an array's ``actual`` shape, binding size variables
    in ``values`` (a bare variable binds; an expression with one unbound variable that
    appears in it linearly, like ``past + 1``, is solved). Returns a message if they
    conflict, else ``None``; expressions still unbound are left for a later check."""
    if len(shape) != len(actual):
        return f"{where}: expected rank {len(shape)} {tuple(map(str, shape))}, got shape {tuple(actual)}"
    pending = []
    for axis, (d, n) in enumerate(zip(shape, actual)):
        if type(d) is int:
            if d != n:
                return f"{where}: axis {axis} must be {d}, got shape {tuple(actual)}"
        elif type(d) is Dim:
            name = d.name
            if name is not None:
                old = values.get(name)
                if old is None:
                    values[name] = int(n)
                elif old != n:
                    return (f"{where}: size variable {name} is {old} from an earlier argument but {n} here "
                            f"(axis {axis} of shape {tuple(actual)})")
            else:
                pending.append((axis, d, int(n)))
    for _ in range(2):
        left = []
        for axis, d, n in pending:
            unbound = free_size_vars(d) - set(values)
            if not unbound:
                got = evaluate_dim(d, values)
                if got != n:
                    return (f"{where}: axis {axis} is {d} = {got} for "
                            f"{', '.join(f'{k}={values[k]}' for k in sorted(free_size_vars(d)))}, got {n}")
            elif len(unbound) == 1:
                solved = _solve_linear(d, unbound.pop(), n, values)
                if solved is None:
                    left.append((axis, d, n))
            else:
                left.append((axis, d, n))
        pending = left
    return None


def _solve_linear(d: Dim, name: str, n: int, values: dict) -> Optional[bool]:
    """Bind ``name`` so that ``d == n`` when ``d`` is ``a*name + rest`` with ``rest``
    known; ``None`` if ``d`` is not of that form."""
    a, rest = 0, 0
    for mono, c in d.terms:
        if mono == (name,):
            a += c
        elif name in free_size_vars(Dim(((mono, 1),))):
            return None
        else:
            rest = _add(rest, substitute(_from_terms(((mono, c),)), values))
    if type(rest) is not int or a == 0 or (n - rest) % a:
        return None
    values[name] = (n - rest) // a
    return True
