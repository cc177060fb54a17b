"""Structural equality and hashing of expressions, modules, types and attrs.

Nodes compare by identity (``is``); these functions compare *structure*, as TVM's
``tvm.ir.structural_equal`` / ``structural_hash`` do for Relay:

* **Graph nodes** — ``Call``, non-empty ``Tuple``, ``TupleGetItem``, ``Let``, ``If``,
  ``Function`` and ``Var`` — are matched one-to-one: two expressions are equal iff a
  consistent bijection maps every graph node of one to a graph node of the other with
  equal fields. Sharing therefore matters: with ``y = add(x, x)``, ``add(y, y)`` is
  **not** equal to ``add(add(x, x), add(x, x))`` (TVM's ``test_graph_equal``: the
  printed programs differ too, ``%0 = add(%x, %x); add(%0, %0)`` against two lets).
* **Leaves** — ``Constant`` (dtype, shape and bytes; NaN payloads compare by bits; a
  large one hashes a sample of its elements and two views of the same bytes of one
  mapped file are equal unread: see :mod:`passhost.weights`),
  ``Op`` (identity: one object per name), ``GlobalVar`` (by name) and the empty tuple —
  compare by value, so ``add(c, c)`` equals ``add(c1, c2)`` when ``c1``, ``c2`` hold
  the same data as ``c`` (TVM does not treat constants as graph nodes either).
* **Bound variables** (function parameters, let variables) are matched at their
  binding site, positionally; names never matter, type annotations do.
* **Free variables** are equal only when they are the same object, unless
  ``map_free_vars=True``: then they are mapped one-to-one by first occurrence.
* ``Call``: callee, arguments and attrs (compared as dicts); ``Function``: parameters,
  body, ``ret_type`` and attrs. Inferred ``checked_type`` is not compared (TVM neither).
* ``IRModule``: the same function names, each pair of functions equal (one mapping
  shared across the module), and equal module attrs.

:func:`structural_hash` is consistent with :func:`structural_equal` (equal values hash
alike, whatever ``map_free_vars``) and never depends on variable names: every variable
hashes as its index in first-occurrence order plus its type annotation. Hashes are
stable within one process (they build on Python's ``hash``, which salts strings).

Both walk with explicit stacks, so 100,000-deep chains need no recursion.
"""
from __future__ import annotations

from typing import Any

from ..errors import IRError
from ..weights import LARGE, equal
from ._gc import gc_paused
from .expr import (BINDER, BINDERS, BINDERS_OF, CHILDREN_OF, DATA, DATA_OF, NODE_CLASSES, USES_OF, Attrs, Call, Constant, Expr, GlobalVar,
                   Let, Tuple, Var)
from .module import IRModule
from .op import Op
from .types import Type
from .visitor import post_order

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal"]


# --------------------------------------------------------------------------- equality


def _const_equal(a: Constant, b: Constant) -> bool:
    da, db = a.data, b.data
    if da.dtype != db.dtype or da.shape != db.shape:
        return False
    if a.data_hash() != b.data_hash():
        return False
    if da.nbytes >= LARGE:  # the same bytes of one file unread, else a block at a time
        return equal(da, db)
    return da.tobytes() == db.tobytes()


class _Equal:
    """One comparison session: the lhs→rhs / rhs→lhs maps of graph nodes."""

    __slots__ = ("lmap", "rmap", "map_free_vars", "consts")

    def __init__(self, map_free_vars: bool) -> None:
        self.lmap: dict = {}
        self.rmap: dict = {}
        self.map_free_vars = bool(map_free_vars)
        self.consts: dict = {}  # (lhs, rhs) -> bool for large constants met more than once

    def define(self, a: Var, b: Var) -> bool:
        """Match two variables at their binding site."""
        lmap, rmap = self.lmap, self.rmap
        m = lmap.get(a)
        if m is not None:
            return m is b
        if b in rmap:
            return False
        ta, tb = a.type_annotation, b.type_annotation
        if ta is not tb and ta != tb:
            return False
        lmap[a] = b
        rmap[b] = a
        return True

    # hot loop: one step per pair of nodes compared, each kind in line (structural_equal of two 100k-node
    # graphs)
    def exprs(self, a: Expr, b: Expr) -> bool:
        """Compare two expression graphs; the maps are extended as a side effect."""
        lmap, rmap = self.lmap, self.rmap
        lget = lmap.get
        map_free = self.map_free_vars
        define = self.define
        _Call, _Const, _Var, _Op, _Tuple, _Let, _GV = Call, Constant, Var, Op, Tuple, Let, GlobalVar
        specs = _EQ_SPECS
        stack = [(a, b)]
        pop = stack.pop
        push = stack.append
        push_all = stack.extend
        while stack:
            a, b = pop()
            t = type(a)
            if t is not type(b):
                return False
            if t is _Const:
                if a is not b:
                    if a.data.nbytes <= 256:
                        if not _const_equal(a, b):
                            return False
                    else:
                        key = (a, b)
                        same = self.consts.get(key)
                        if same is None:
                            same = self.consts[key] = _const_equal(a, b)
                        if not same:
                            return False
                continue
            if t is _Op:
                if a is not b:
                    return False
                continue
            if t is _GV:
                if a.name_hint != b.name_hint:
                    return False
                continue
            m = lget(a)
            if m is not None:
                if m is not b:
                    return False
                continue
            if b in rmap:
                return False
            if t is _Call:
                aargs, bargs = a.args, b.args
                n = len(aargs)
                if n != len(bargs):
                    return False
                aat, bat = a.attrs, b.attrs
                if aat is not bat and aat != bat:
                    return False
                lmap[a] = b
                rmap[b] = a
                for i in range(n - 1, -1, -1):
                    push((aargs[i], bargs[i]))
                aop, bop = a.op, b.op
                if type(aop) is _Op:
                    if aop is not bop:
                        return False
                else:
                    push((aop, bop))
            elif t is _Var:
                # a use of a variable not matched at a binding site: a free variable
                if a is not b and not map_free:
                    return False
                ta, tb = a.type_annotation, b.type_annotation
                if ta is not tb and ta != tb:
                    return False
                lmap[a] = b
                rmap[b] = a
            elif t is _Let:  # (unrolled: let chains are the long ones in A-normal form)
                lmap[a] = b
                rmap[b] = a
                if not define(a.var, b.var):
                    return False
                push((a.body, b.body))
                push((a.value, b.value))
            elif t is _Tuple and not a.fields:
                if b.fields:
                    return False
                # the empty tuple is a value, not a graph node (as in TVM): no mapping
            else:
                spec = specs.get(t)
                if spec is None:
                    raise IRError(f"structural_equal cannot compare {t.__name__} nodes: "
                                  "pass IR expressions, types, attrs or modules")
                data_of, uses_of, binders_of = spec
                if data_of is not None and data_of(a) != data_of(b):  # element by element, identity first
                    return False
                ua, ub = uses_of(a), uses_of(b)
                if len(ua) != len(ub):
                    return False
                if binders_of is not None:
                    va, vb = binders_of(a), binders_of(b)
                    if len(va) != len(vb):
                        return False
                    lmap[a] = b
                    rmap[b] = a
                    for x, y in zip(va, vb):
                        if not define(x, y):
                            return False
                else:
                    lmap[a] = b
                    rmap[b] = a
                push_all(zip(ua[::-1], ub[::-1]))
        return True

    def any(self, a: Any, b: Any) -> bool:
        if isinstance(a, Expr) and isinstance(b, Expr):
            return self.exprs(a, b)
        if isinstance(a, IRModule) or isinstance(b, IRModule):
            if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
                return False
            fa = {g.name_hint: f for g, f in a.items()}
            fb = {g.name_hint: f for g, f in b.items()}
            if fa.keys() != fb.keys():
                return False
            for name in sorted(fa):
                if not self.exprs(fa[name], fb[name]):
                    return False
            return a.attrs == b.attrs
        if isinstance(a, Type) or isinstance(b, Type):
            return type(a) is type(b) and a == b
        if isinstance(a, dict) and isinstance(b, dict):  # Attrs (and plain dicts)
            return a == b
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return False
            return all(self.any(x, y) for x, y in zip(a, b))
        if a is None or b is None:
            return a is b
        if isinstance(a, Expr) or isinstance(b, Expr):
            return False
        raise IRError(f"structural_equal cannot compare {type(a).__name__} with {type(b).__name__}: "
                      "pass IR expressions, modules, types, attrs or lists of them")


@gc_paused
def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Whether ``a`` and ``b`` are structurally equal (see the module docs).

    :param a: an expression, :class:`IRModule`, type, attrs, or a list/tuple of them
    :param b: the same kind of value
    :param map_free_vars: map free variables of ``a`` to those of ``b`` one-to-one
        (by first occurrence) instead of requiring the very same variable objects
    :raises IRError: for values that are not IR objects
    """
    return _Equal(map_free_vars).any(a, b)


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise :class:`IRError` showing both texts when ``a`` and ``b`` differ."""
    if not structural_equal(a, b, map_free_vars):
        raise IRError("structurally different:\n--- lhs ---\n" + _text(a)
                      + "\n--- rhs ---\n" + _text(b))


def _text(x: Any) -> str:
    try:
        return str(x)
    except Exception as err:  # the printer may not know some node; still report
        return f"{x!r} (not printable: {err})"


# --------------------------------------------------------------------------- hashing

_H_VAR = hash("passhost.Var")
_H_CALL = hash("passhost.Call")
_H_OP = hash("passhost.Op")
_H_LET = hash("passhost.Let")
_H_GV = hash("passhost.GlobalVar")
_H_CONST = hash("passhost.Constant")
_H_MOD = hash("passhost.IRModule")
_H_NONE = hash(None)


def _getter_if(cls: type, table: dict, kinds: tuple):
    """``table[cls]`` if the class has a field of ``kinds``, else None (nothing to read)."""
    return table[cls] if any(kind in kinds for _, kind in cls.FIELDS) else None


#: per interior node class, from its ``FIELDS``: (its tag, its children, its data fields
#: or None) for hashing, and (data fields or None, uses, binders or None) for comparing
_HASH_SPECS = {cls: (hash("passhost." + cls.__name__), CHILDREN_OF[cls], _getter_if(cls, DATA_OF, (DATA,)))
               for cls in NODE_CLASSES}
_EQ_SPECS = {cls: (_getter_if(cls, DATA_OF, (DATA,)), USES_OF[cls], _getter_if(cls, BINDERS_OF, (BINDER, BINDERS)))
             for cls in NODE_CLASSES}


def _attrs_hash(attrs: Attrs, cache: dict) -> int:
    key = id(attrs)
    h = cache.get(key)
    if h is None:
        try:
            h = hash(attrs)
        except TypeError:  # a plain dict or an unhashable value: hash the keys only
            h = hash(tuple(sorted(map(str, attrs))))
        cache[key] = h
    return h


def _expr_hash(root: Expr) -> int:
    memo: dict = {}
    get = memo.__getitem__
    acache: dict = {}
    nvars = 0
    _Call, _Const, _Var, _Op, _Let, _GV = Call, Constant, Var, Op, Let, GlobalVar
    hash_specs = _HASH_SPECS
    for node in post_order(root):
        t = type(node)
        if t is _Call:
            at = node.attrs
            if not at:  # no attributes (EMPTY_ATTRS or an equal empty Attrs)
                h = hash((_H_CALL, get(node.op), *map(get, node.args)))
            else:
                ah = acache.get(id(at))
                if ah is None:
                    ah = _attrs_hash(at, acache)
                h = hash((_H_CALL, get(node.op), ah, *map(get, node.args)))
        elif t is _Const:
            h = hash((_H_CONST, node.data_hash()))
        elif t is _Var:
            ann = node.type_annotation
            h = hash((_H_VAR, nvars, _H_NONE if ann is None else hash(ann)))
            nvars += 1
        elif t is _Op:
            h = hash((_H_OP, node.name))
        elif t is _Let:  # (unrolled: let chains are the long ones in A-normal form)
            h = hash((_H_LET, get(node.var), get(node.value), get(node.body)))
        elif t is _GV:
            h = hash((_H_GV, node.name_hint))
        else:
            spec = hash_specs.get(t)
            if spec is None:
                raise IRError(f"structural_hash cannot hash {t.__name__} nodes: "
                              "pass IR expressions, types, attrs or modules")
            tag, kids_of, data_of = spec
            if data_of is None:
                h = hash((tag, *map(get, kids_of(node))))
            else:
                h = hash((tag, *map(get, kids_of(node)),
                          *[_H_NONE if v is None else _attrs_hash(v, acache) if isinstance(v, dict) else hash(v)
                            for v in data_of(node)]))
        memo[node] = h
    return memo[root]


@gc_paused
def structural_hash(a: Any, map_free_vars: bool = False) -> int:
    """A hash consistent with :func:`structural_equal` (for either ``map_free_vars``).

    Variables hash by their first-occurrence index and type annotation, never by name;
    constants by dtype, shape and bytes; ops and global vars by name.

    :param a: an expression, :class:`IRModule`, type, attrs, or a list/tuple of them
    :param map_free_vars: accepted for symmetry with :func:`structural_equal`; the hash
        already treats free variables positionally, so it does not change the result
    :raises IRError: for values that are not IR objects
    """
    del map_free_vars  # free variables always hash positionally (TVM does the same)
    return _hash_any(a)


def _hash_any(a: Any) -> int:
    if isinstance(a, Expr):
        return _expr_hash(a)
    if isinstance(a, IRModule):
        items = sorted((g.name_hint, f) for g, f in a.items())
        return hash((_H_MOD, *((name, _expr_hash(f)) for name, f in items)))
    if isinstance(a, Type):
        return hash(a)
    if isinstance(a, dict):
        return _attrs_hash(a, {})
    if isinstance(a, (list, tuple)):
        return hash(tuple(_hash_any(x) for x in a))
    if a is None:
        return _H_NONE
    raise IRError(f"structural_hash cannot hash a {type(a).__name__}: "
                  "pass an IR expression, module, type, attrs or a list of them")
