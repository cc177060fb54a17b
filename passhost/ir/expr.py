"""Expression nodes of the IR.

Nodes are immutable and compared by identity: two ``add(x, y)`` calls built
separately are different nodes (use :func:`passhost.ir.structural_equal` to
compare structure). A DAG shares sub-expressions by object identity, exactly as
Relay's graph normal form does.

``checked_type`` is the one field filled in later: type inference writes it once;
reading it before inference raises :class:`~passhost.errors.IRError`. Type
inference also fills in a missing ``Var.type_annotation`` once (TVM prints
``%w: Tensor[...]`` after ``InferType`` even for ``relay.var("w")``).
"""
from __future__ import annotations

import difflib
import operator
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from ..errors import IRError
from ..weights import LARGE as _LARGE, digest as _digest, keep as _keep
from .dims import ANY, Dim
from .facts import OPS_EVER_CALLED
from .span import Span
from .types import Type, TensorType, check_dtype

if TYPE_CHECKING:  # the operator records live in .op, which builds on these nodes
    from .op import Kernel, OpDef, TypeRel

__all__ = [
    "Attrs",
    "Expr",
    "Var",
    "Constant",
    "Call",
    "Function",
    "Tuple",
    "TupleGetItem",
    "Let",
    "If",
    "GlobalVar",
    "Op",
    "EMPTY_ATTRS",
]

_set = object.__setattr__


#: attribute value types kept as they are by _freeze (already hashable and immutable)
_PLAIN = frozenset({int, float, str, bool, type(None)})


def _freeze(value: Any) -> Any:
    """Normalise an attribute value to a hashable, immutable Python value."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _freeze(value.tolist())
    if isinstance(value, dict):
        return Attrs(value)
    return value


class Attrs(dict):
    """An immutable mapping of attribute names to plain values.

    Lists are stored as tuples, so attrs hash and compare by value. Fields are also
    readable as attributes (``call.attrs.strides``), as in TVM.
    """

    __slots__ = ()

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        if type(items) is dict:
            plain = _PLAIN
            for v in items.values():
                if type(v) not in plain:
                    break
            else:  # every value is already frozen: no per-item rebuild
                dict.__init__(self, items)
                return
            src = items.items()
        else:
            src = items.items() if isinstance(items, Mapping) else items
        dict.__init__(self, ((k, _freeze(v)) for k, v in src))

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Attrs are immutable; build a new node with different attrs")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"attrs have no field {name!r}; fields: {sorted(self)}") from None

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return "Attrs(" + dict.__repr__(self) + ")"

    def __reduce__(self):  # pragma: no cover - copy support
        return (Attrs, (dict(self),))


#: the shared empty attrs (calls of ops without attributes, functions without attrs)
EMPTY_ATTRS = Attrs()


#: The kinds of a node's fields (``FIELDS``): a sub-expression, a tuple of them, a
#: variable the node binds (a let's ``var``, a function's ``params``) or a tuple of those,
#: and plain data that structural comparison compares by value (attrs, an index, a type).
CHILD, CHILDREN, BINDER, BINDERS, DATA = "child", "children", "binder", "binders", "data"
_SUBNODE = frozenset({CHILD, CHILDREN, BINDER, BINDERS})


class Expr:
    """Base class of every expression node.

    Each node class describes its fields once, in ``FIELDS``: ``(name, kind)`` pairs in
    evaluation order (kinds: :data:`CHILD`, :data:`CHILDREN`, :data:`BINDER`,
    :data:`BINDERS`, :data:`DATA`). The traversals, the rebuild, structural equality and
    hashing, the verifier and the printer's use counts read a node's children from it
    (:func:`passhost.ir.children`) instead of naming each class's fields themselves::

        If.FIELDS == (("cond", CHILD), ("true_branch", CHILD), ("false_branch", CHILD))
        children(if_node) == (cond, true_branch, false_branch)
    """

    __slots__ = ("_checked_type", "_span")
    FIELDS: tuple = ()

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} nodes are immutable; build a new node instead")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    @property
    def checked_type(self) -> Type:
        """The type computed by type inference.

        :raises IRError: if type inference has not run on this node yet
        """
        t = self._checked_type
        if t is None:
            raise IRError(
                f"the type of this {type(self).__name__} is not known yet: run type "
                "inference first (passhost.ir.infer_type(mod) or the InferType pass)"
            )
        return t

    @property
    def span(self) -> Optional[Span]:
        """Where this node came from (:class:`passhost.ir.Span`), or ``None``; set by the
        parser with ``spans=True``, the AnnotateSpans pass or an importer (see :func:`set_span`)."""
        return self._span

    @property
    def has_type(self) -> bool:
        """Whether type inference has set :attr:`checked_type`."""
        return self._checked_type is not None

    def _set_checked_type(self, ty: Type) -> None:
        # The single place that writes a node after construction (type inference).
        _set_type(self, ty)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __str__(self) -> str:
        from .printer import pretty_print

        return pretty_print(self)

    def astext(self, show_meta_data: bool = True) -> str:
        """Text form with the version header (and metadata section when asked)."""
        from .printer import astext

        return astext(self, show_meta_data=show_meta_data)

    # Arithmetic sugar, as Relay's Python API offers.
    def __add__(self, other: Any) -> "Call":
        from . import builders

        return builders.add(self, _lift(other, self))

    def __sub__(self, other: Any) -> "Call":
        from . import builders

        return builders.subtract(self, _lift(other, self))

    def __mul__(self, other: Any) -> "Call":
        from . import builders

        return builders.multiply(self, _lift(other, self))

    def __truediv__(self, other: Any) -> "Call":
        from . import builders

        return builders.divide(self, _lift(other, self))

    def __neg__(self) -> "Call":
        from . import builders

        return builders.negative(self)

    # Equality and hashing are object identity (inherited from ``object``).


#: (a declared fact, see :mod:`passhost.ir.facts`: Call.__init__ records its operator)
_note_called = OPS_EVER_CALLED.add

#: The slots' own setters (``member_descriptor.__set__``): constructors run once per node
#: of every graph a pass builds, and these cost about a third of ``object.__setattr__``.
_set_type = Expr.__dict__["_checked_type"].__set__
_set_span = Expr.__dict__["_span"].__set__
_new = object.__new__


#: ``type_of(node)``: its ``checked_type``, or ``None`` while it is not typed (never raises).
#: A C-level getter: passes read it once per node, where ``node.checked_type`` (which
#: raises on an untyped node) or ``has_type`` followed by it would cost two calls.
type_of = operator.attrgetter("_checked_type")


def set_checked_type(node: Expr, ty: Type) -> Expr:
    """Type ``node``, a node a pass just built, with ``ty`` and return it -- what TVM's
    passes do with ``checked_type_`` when they know a new node's type (a folded constant
    has the type of the call it replaces)::

        const = ir.set_checked_type(ir.Constant(value), call.checked_type)

    For a node rebuilt from another, :func:`passhost.ir.keep_checked_type` checks the
    children first; use that where it applies.

    :raises IRError: if ``ty`` is not a type, or ``node`` already has another type
    """
    if not isinstance(ty, Type):
        raise IRError(f"set_checked_type needs a passhost.ir.Type, got {ty!r}")
    cur = node._checked_type
    if cur is not None and cur is not ty and cur != ty:
        raise IRError(f"set_checked_type: this {type(node).__name__} is already typed {cur}, not {ty}")
    _set_type(node, ty)
    return node


def set_span(node: Expr, span: Optional[Span]) -> Expr:
    """Give ``node`` the source span ``span`` (metadata: structure, equality and hash do not
    change) and return it. Importers call it on the nodes they build::

        call = ir.nn.conv2d(x, w)
        ir.set_span(call, ir.Span("resnet50.onnx", name="Conv_12"))
    """
    if span is not None and not isinstance(span, Span):
        raise IRError(f"a span must be a passhost.ir.Span or None, got {span!r}")
    _set_span(node, span)
    return node


def _lift(value: Any, like: Expr) -> Expr:
    if isinstance(value, Expr):
        return value
    dtype = None
    t = like._checked_type
    if isinstance(t, TensorType):
        dtype = t.dtype
    elif isinstance(like, Var) and isinstance(like.type_annotation, TensorType):
        dtype = like.type_annotation.dtype
    return Constant(np.array(value, dtype=dtype or "float32"))


class Var(Expr):
    """A local variable: a function parameter or a ``let``-bound name.

    :param name_hint: the name printed as ``%name`` (made unique when printing)
    :param type_annotation: its declared type, or ``None`` to let inference fill it
    """

    __slots__ = ("name_hint", "type_annotation")
    FIELDS = (("type_annotation", DATA),)

    def __init__(self, name_hint: str, type_annotation: Optional[Type] = None) -> None:
        if type(name_hint) is not str and not isinstance(name_hint, str):
            raise IRError(f"Var name must be a string, got {name_hint!r}")
        if type_annotation is not None and type(type_annotation) is not TensorType \
                and not isinstance(type_annotation, Type):
            raise IRError(f"type annotation of %{name_hint} must be a Type, got {type_annotation!r}")
        _var_name(self, name_hint)
        _var_annotation(self, type_annotation)
        _set_type(self, None)
        _set_span(self, None)

    def _set_type_annotation(self, ty: Type) -> None:
        # Type inference fills a missing annotation once (as TVM's InferType does).
        _var_annotation(self, ty)

    def __repr__(self) -> str:
        return f"Var(%{self.name_hint})"


_var_name = Var.__dict__["name_hint"].__set__
_var_annotation = Var.__dict__["type_annotation"].__set__


class Constant(Expr):
    """A constant tensor. ``data`` is a read-only numpy array, contiguous in C or Fortran
    order: a read-only array already so is kept as it is (a folded ``transpose`` of a
    weight is a view of it, not a copy; a weight mapped from its file stays mapped); any
    other is copied into C order (a large one through :func:`passhost.weights.keep`, which
    may put it in a scratch file). Everything that writes the bytes out (the text format's
    meta data, ONNX export, hashing) reads them in C order, so the layout never shows."""

    __slots__ = ("data", "_data_hash")
    FIELDS = (("data", DATA),)

    def __init__(self, data: Any) -> None:
        arr = np.asarray(data)
        check_dtype(arr.dtype)
        flags = arr.flags
        if flags.writeable or not (flags.c_contiguous or flags.f_contiguous):
            if arr.nbytes >= _LARGE:  # a new weight: in memory, or in the scratch file (passhost.weights)
                arr = _keep(arr)
            else:
                arr = np.array(arr, copy=True, order="C")
                arr.flags.writeable = False
        _set(self, "data", arr)
        _set(self, "_data_hash", None)
        _set(self, "_checked_type", None)
        _set(self, "_span", None)

    @property
    def dtype(self) -> str:
        return self.data.dtype.name

    @property
    def is_scalar(self) -> bool:
        return self.data.ndim == 0

    def data_hash(self) -> int:
        """Hash of dtype, shape and bytes (cached; constants never change); a large weight
        hashes a sample of its elements (:func:`passhost.weights.digest`), so a weight
        mapped from a file is not read whole."""
        h = self._data_hash
        if h is None:
            arr = self.data
            if arr.nbytes < _LARGE:
                h = hash((arr.dtype.name, arr.shape, hash(arr.tobytes())))
            else:
                h = _digest(arr)
            _set(self, "_data_hash", h)
        return h

    def __repr__(self) -> str:
        if self.data.ndim == 0:
            return f"Constant({self.data.item()!r}, {self.dtype})"
        return f"Constant(shape={self.data.shape}, {self.dtype})"


class GlobalVar(Expr):
    """A reference to a function of the module: ``@name``."""

    __slots__ = ("name_hint",)
    FIELDS = (("name_hint", DATA),)

    def __init__(self, name_hint: str) -> None:
        if not isinstance(name_hint, str) or not name_hint:
            raise IRError(f"GlobalVar needs a non-empty name, got {name_hint!r}")
        _set(self, "name_hint", name_hint)
        _set(self, "_checked_type", None)
        _set(self, "_span", None)

    def __repr__(self) -> str:
        return f"GlobalVar(@{self.name_hint})"


class Op(Expr):
    """A primitive operator, referenced from :class:`~passhost.ir.Call` nodes.

    Use :meth:`Op.get`; ops are never constructed directly.
    """

    __slots__ = ("name", "_def", "_defaults", "_keys", "_attrs_cache")
    FIELDS = (("name", DATA),)

    _registry: dict = {}

    def __init__(self, opdef: "OpDef") -> None:
        _set(self, "name", opdef.name)
        _set(self, "_def", opdef)
        defaults = Attrs(opdef.attrs) if opdef.attrs else EMPTY_ATTRS
        _set(self, "_defaults", defaults)
        _set(self, "_keys", frozenset(k for k, _ in opdef.attrs))
        _set(self, "_attrs_cache", {})
        _set(self, "_checked_type", None)
        _set(self, "_span", None)

    # -- registry -----------------------------------------------------------
    @staticmethod
    def get(name: str) -> "Op":
        """Return the operator called ``name``.

        :raises IRError: if no such operator is registered (with close names)
        """
        try:
            return Op._registry[name]
        except KeyError:
            pass
        except TypeError:
            raise IRError(f"operator names are strings, got {name!r}") from None
        close = difflib.get_close_matches(str(name), list(Op._registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise IRError(f"operator `{name}` not found, perhaps you forgot to register it{hint}")

    # -- definition accessors ---------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return self._def.num_inputs

    @property
    def pattern(self) -> int:
        return self._def.pattern

    @property
    def stateful(self) -> bool:
        return self._def.stateful

    @property
    def type_rel(self) -> TypeRel:
        return self._def.type_rel

    @property
    def compute(self) -> Optional[Kernel]:
        return self._def.compute

    @property
    def attr_defaults(self) -> Attrs:
        """Declared attributes and their defaults, in declaration order."""
        return self._defaults

    @property
    def definition(self) -> OpDef:
        return self._def

    def _normalize_attrs(self, attrs: Optional[Mapping[str, Any]]) -> Attrs:
        """Validate ``attrs`` against the declaration and fill in defaults.

        Attributes of plain scalars and tuples of ints (what importers and passes build
        calls with: strides, padding, an axis) are normalised once per operator and
        distinct value: the result is immutable, so every call made with equal attributes
        shares it (a keyed cache, :data:`_ATTRS_CACHE_SIZE` entries per operator)."""
        if not attrs:
            return self._defaults
        if type(attrs) is Attrs and attrs.keys() == self._keys:
            return attrs
        key = _attrs_key(attrs) if type(attrs) is dict else None
        if key is not None:
            cache = self._attrs_cache
            hit = cache.get(key)
            if hit is not None:
                return hit
            out = self._normalize_new(attrs)
            if len(cache) < _ATTRS_CACHE_SIZE:
                cache[key] = out
            return out
        return self._normalize_new(attrs)

    def _normalize_new(self, attrs: Mapping[str, Any]) -> Attrs:
        unknown = [k for k in attrs if k not in self._keys]
        if unknown:
            known = ", ".join(k for k, _ in self._def.attrs) or "none"
            raise IRError(f"operator {self.name} has no attribute {unknown[0]!r} (its attributes: {known})")
        out = Attrs((k, attrs[k] if k in attrs else d) for k, d in self._def.attrs)
        check = self._def.attr_check
        if check is not None:
            check(out)
        return out

    def __repr__(self) -> str:
        return f"Op({self.name})"

    def __reduce__(self):
        return (Op.get, (self.name,))


#: normalised attributes kept per operator (see Op._normalize_attrs)
_ATTRS_CACHE_SIZE = 1024


def _attrs_key(attrs: dict) -> Optional[tuple]:
    """A key that tells apart every two attribute dicts whose normalised forms differ, or
    ``None`` for values it does not cover. Types are part of it (``1``, ``1.0`` and
    ``True`` are equal in Python but not as attributes), floats go by their exact bits
    (``-0.0``), and tuples only of ints (not bools) are covered; lists count as tuples,
    as ``Attrs`` stores them. Dimensions count as ints: a size variable or an expression
    over them (:class:`~passhost.ir.dims.Dim`, immutable, equal and hashed by its canonical
    form) and ``?``, so the symbolic shapes of a dynamic model's reshapes and
    ``shape_value`` calls hit the cache too."""
    key = []
    for k, v in attrs.items():
        t = type(v)
        if t is int or t is str or t is bool or v is None or t is Dim or v is ANY:
            key.append((k, t, v))
        elif t is float:
            key.append((k, t, v.hex()))
        elif t is tuple or t is list:
            for e in v:
                if type(e) is not int and type(e) is not Dim and e is not ANY:
                    return None
            key.append((k, tuple, tuple(v)))
        else:
            return None
    return tuple(key)


class Call(Expr):
    """``op(args..., attrs)``: a call of an operator, function, closure or global.

    For operators, ``attrs`` is validated against the op's declared attributes and
    completed with their defaults (unknown names raise).
    """

    __slots__ = ("op", "args", "attrs")
    FIELDS = (("op", CHILD), ("args", CHILDREN), ("attrs", DATA))

    def __init__(self, op: Expr, args: Sequence[Expr], attrs: Optional[Mapping[str, Any]] = None) -> None:
        if type(args) is not tuple:
            args = tuple(args)
        if type(op) is Op:
            if attrs is None:
                attrs = op._defaults
            elif attrs is not op._defaults and not (attrs.__class__ is Attrs and attrs.keys() == op._keys):
                attrs = op._normalize_attrs(attrs)
            n = op._def.num_inputs
            if n >= 0 and len(args) != n:
                raise IRError(f"operator {op.name} takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
            _note_called(op)
        else:
            if not isinstance(op, Expr):
                raise IRError(f"the callee of a Call must be an expression, got {op!r}")
            if attrs is None:
                attrs = EMPTY_ATTRS
            elif type(attrs) is not Attrs:
                attrs = Attrs(attrs)
        for a in args:
            if not isinstance(a, Expr):
                raise IRError(f"call arguments must be expressions, got {a!r}")
        _call_op(self, op)
        _call_args(self, args)
        _call_attrs(self, attrs)
        _set_type(self, None)
        _set_span(self, None)

    def with_args(self, args: tuple, keep_type: bool = True, args_typed: bool = False) -> "Call":
        """This call with new ``args`` (a tuple of expressions; same callee and attrs).

        A fast path for passes that rebuild many calls: it skips the checks this call
        already passed (callee, attrs, arity). With ``keep_type`` the copy keeps this
        call's ``checked_type`` when every new argument is typed — the copy-on-write
        rebuild of TVM, valid for type-preserving rewrites such as CSE or folding.
        ``args_typed`` says the caller knows they are (every node of a typed graph is, and
        CSE's replacements come from it), so they are not checked one by one.
        """
        new = _new(Call)
        _call_op(new, self.op)
        _call_args(new, args)
        _call_attrs(new, self.attrs)
        ty = self._checked_type if keep_type else None
        if ty is not None and not args_typed:
            for a in args:
                if a._checked_type is None and type(a) is not Op:
                    ty = None
                    break
        _set_type(new, ty)
        _set_span(new, self._span)
        return new

    def __getitem__(self, index: int) -> "TupleGetItem":
        """``call[i]`` is ``TupleGetItem(call, i)`` (for tuple-valued calls such as batch_norm)."""
        return TupleGetItem(self, index)

    @property
    def type_args(self) -> tuple:
        """The types the callee's type parameters were instantiated with, as TVM's type
        inference fills ``Call.type_args``.

        TVM types an operator call through ``PrimitiveCall``, which records the argument
        types as the call's type arguments (``type_infer.cc``: ``AddTypeArgs(call,
        arg_types)``; TVM's ``test_type_args`` checks two for ``add``), so for an operator
        call, once typed, they are its argument types::

            add(%x, 1f)   # %x: Tensor[(2), float32]
            type_args == (Tensor[(2), float32], float32)

        Calls of functions, globals and closures have none (passhost functions have no type
        parameters, and TVM gives a call of a monomorphic function none either), and neither
        does a call that is not typed yet: ``()``.
        """
        ty = self._checked_type
        if ty is None or type(self.op) is not Op:
            return ()
        out = []
        for a in self.args:
            t = a._checked_type
            if t is None:
                return ()
            out.append(t)
        return tuple(out)

    def __repr__(self) -> str:
        name = self.op.name if type(self.op) is Op else type(self.op).__name__
        return f"Call({name}, {len(self.args)} args)"


_call_op = Call.__dict__["op"].__set__
_call_args = Call.__dict__["args"].__set__
_call_attrs = Call.__dict__["attrs"].__set__


class Function(Expr):
    """``fn (%params) -> ret_type { body }`` with optional ``attrs`` (e.g. ``Primitive=1``).

    Functions can be weakly referenced (``weakref.WeakKeyDictionary``), so passes may
    remember facts about a function object -- "already folded", "uses these operators" --
    without keeping it alive; being immutable, a function's facts never go stale.
    """

    __slots__ = ("params", "body", "ret_type", "attrs", "__weakref__")
    FIELDS = (("params", BINDERS), ("body", CHILD), ("ret_type", DATA), ("attrs", DATA))

    def __init__(self, params: Sequence[Var], body: Expr, ret_type: Optional[Type] = None,
                 attrs: Optional[Mapping[str, Any]] = None) -> None:
        if type(params) is not tuple:
            params = tuple(params)
        for p in params:
            if type(p) is not Var:
                raise IRError(f"function parameters must be Vars, got {p!r}")
        if not isinstance(body, Expr):
            raise IRError(f"function body must be an expression, got {body!r}")
        if ret_type is not None and type(ret_type) is not TensorType and not isinstance(ret_type, Type):
            raise IRError(f"function return type must be a Type, got {ret_type!r}")
        if attrs is None:
            attrs = EMPTY_ATTRS
        elif type(attrs) is not Attrs:
            attrs = Attrs(attrs)
        _fn_params(self, params)
        _fn_body(self, body)
        _fn_ret_type(self, ret_type)
        _fn_attrs(self, attrs)
        _set_type(self, None)
        _set_span(self, None)

    def _set_ret_type(self, ty: Type) -> None:
        # Type inference fills a missing return type once (as TVM's InferType does).
        _fn_ret_type(self, ty)

    def with_attr(self, key: str, value: Any) -> "Function":
        """A copy of this function with one attribute set."""
        attrs = dict(self.attrs)
        attrs[key] = value
        return Function(self.params, self.body, self.ret_type, attrs)

    def __repr__(self) -> str:
        return f"Function({len(self.params)} params)"


_fn_params = Function.__dict__["params"].__set__
_fn_body = Function.__dict__["body"].__set__
_fn_ret_type = Function.__dict__["ret_type"].__set__
_fn_attrs = Function.__dict__["attrs"].__set__


class Tuple(Expr):
    """``(a, b, ...)``."""

    __slots__ = ("fields",)
    FIELDS = (("fields", CHILDREN),)

    def __init__(self, fields: Sequence[Expr]) -> None:
        if type(fields) is not tuple:
            fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Expr):
                raise IRError(f"tuple fields must be expressions, got {f!r}")
        _tuple_fields(self, fields)
        _set_type(self, None)
        _set_span(self, None)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> Expr:
        return self.fields[i]

    def __repr__(self) -> str:
        return f"Tuple({len(self.fields)} fields)"


_tuple_fields = Tuple.__dict__["fields"].__set__


class TupleGetItem(Expr):
    """``tuple_value.index``."""

    __slots__ = ("tuple_value", "index")
    FIELDS = (("tuple_value", CHILD), ("index", DATA))

    def __init__(self, tuple_value: Expr, index: int) -> None:
        if not isinstance(tuple_value, Expr):
            raise IRError(f"TupleGetItem needs an expression, got {tuple_value!r}")
        if type(index) is not int and (isinstance(index, bool) or not isinstance(index, (int, np.integer))) \
                or index < 0:
            raise IRError(f"tuple index must be a non-negative int, got {index!r}")
        _tgi_value(self, tuple_value)
        _tgi_index(self, int(index))
        _set_type(self, None)
        _set_span(self, None)

    def __repr__(self) -> str:
        return f"TupleGetItem(.{self.index})"


_tgi_value = TupleGetItem.__dict__["tuple_value"].__set__
_tgi_index = TupleGetItem.__dict__["index"].__set__


class Let(Expr):
    """``let %var = value; body``."""

    __slots__ = ("var", "value", "body")
    FIELDS = (("var", BINDER), ("value", CHILD), ("body", CHILD))

    def __init__(self, var: Var, value: Expr, body: Expr) -> None:
        if type(var) is not Var:
            raise IRError(f"let binds a Var, got {var!r}")
        if not isinstance(value, Expr) or not isinstance(body, Expr):
            raise IRError("let value and body must be expressions")
        _let_var(self, var)
        _let_value(self, value)
        _let_body(self, body)
        _set_type(self, None)
        _set_span(self, None)

    def __repr__(self) -> str:
        return f"Let(%{self.var.name_hint})"


_let_var = Let.__dict__["var"].__set__
_let_value = Let.__dict__["value"].__set__
_let_body = Let.__dict__["body"].__set__


class If(Expr):
    """``if (cond) { true_branch } else { false_branch }``."""

    __slots__ = ("cond", "true_branch", "false_branch")
    FIELDS = (("cond", CHILD), ("true_branch", CHILD), ("false_branch", CHILD))

    def __init__(self, cond: Expr, true_branch: Expr, false_branch: Expr) -> None:
        for e in (cond, true_branch, false_branch):
            if not isinstance(e, Expr):
                raise IRError(f"If needs expressions, got {e!r}")
        _if_cond(self, cond)
        _if_then(self, true_branch)
        _if_else(self, false_branch)
        _set_type(self, None)
        _set_span(self, None)

    def __repr__(self) -> str:
        return "If()"


_if_cond = If.__dict__["cond"].__set__
_if_then = If.__dict__["true_branch"].__set__
_if_else = If.__dict__["false_branch"].__set__


# -- children, described once (from each class's FIELDS) ----------------------------------

#: every node class, leaves first
NODE_CLASSES = (Var, Constant, GlobalVar, Op, Call, Function, Tuple, TupleGetItem, Let, If)


def _children_getter(fields: tuple, kinds: frozenset = _SUBNODE):
    """``node -> tuple of its sub-expressions`` (those of the field ``kinds``) for a class
    with these ``FIELDS``, built once per class from C-level getters (the traversals call
    it once per interior node)."""
    subs = [(name, kind in (CHILDREN, BINDERS)) for name, kind in fields if kind in kinds]
    if not subs:
        return lambda node: ()
    if not any(many for _, many in subs):
        get = operator.attrgetter(*[name for name, _ in subs])
        return get if len(subs) > 1 else (lambda node: (get(node),))
    if len(subs) == 1:
        return operator.attrgetter(subs[0][0])
    if len(subs) == 2:
        (n0, m0), (n1, m1) = subs
        g0, g1 = operator.attrgetter(n0), operator.attrgetter(n1)
        if m0 and m1:
            return lambda node: g0(node) + g1(node)
        if m0:
            return lambda node: g0(node) + (g1(node),)
        return lambda node: (g0(node),) + g1(node)
    getters = [(operator.attrgetter(name), many) for name, many in subs]

    def children(node: Expr) -> tuple:
        out: tuple = ()
        for get, many in getters:
            out += get(node) if many else (get(node),)
        return out

    return children


#: class -> ``node -> its children`` (see :func:`passhost.ir.children`)
CHILDREN_OF = {cls: _children_getter(cls.FIELDS) for cls in NODE_CLASSES}
#: class -> ``node -> the sub-expressions it uses``: its children but the variables it
#: binds (a function's parameters, a let's variable), which are definitions, not uses
USES_OF = {cls: _children_getter(cls.FIELDS, frozenset({CHILD, CHILDREN})) for cls in NODE_CLASSES}
#: class -> ``node -> the variables it binds`` (``()`` for most classes)
BINDERS_OF = {cls: _children_getter(cls.FIELDS, frozenset({BINDER, BINDERS})) for cls in NODE_CLASSES}
#: class -> ``node -> its data fields`` (what structural comparison compares by value)
DATA_OF = {cls: _children_getter(cls.FIELDS, frozenset({DATA})) for cls in NODE_CLASSES}


def _uses_mapper(cls: type):
    """``(node, get) -> its children mapped through get(child, child)``, where a binder
    (a definition, not a use) takes only a variable: renaming a binding site is how a
    walk makes fresh copies, but an expression never replaces one."""
    kids_of = CHILDREN_OF[cls]
    if not any(kind in (BINDER, BINDERS) for _, kind in cls.FIELDS):
        def plain(node: Expr, get) -> tuple:
            kids = kids_of(node)
            return tuple(map(get, kids, kids))

        return plain
    parts = [(operator.attrgetter(name), kind) for name, kind in cls.FIELDS if kind in _SUBNODE]

    def mapped(node: Expr, get) -> tuple:
        out: list = []
        for read, kind in parts:
            v = read(node)
            if kind is CHILD:
                out.append(get(v, v))
            elif kind is CHILDREN:
                out.extend(map(get, v, v))
            elif kind is BINDER:
                out.append(_renamed(v, get))
            else:
                out.extend([_renamed(p, get) for p in v])
        return tuple(out)

    return mapped


def _renamed(var: Var, get) -> Var:
    new = get(var, var)
    return new if type(new) is Var else var


#: class -> ``(node, get) -> children mapped through get`` (the rebuild of a walk)
MAP_USES = {cls: _uses_mapper(cls) for cls in NODE_CLASSES}


def _one_sequence_field() -> None:
    # ``rebuild`` splits a flat list of children back into fields, and structural
    # comparison pairs two nodes' children position by position after comparing their
    # counts: both are exact when a class has at most one sequence field (children or
    # binders). A class that needs two must give its own rebuild and comparison.
    for cls in NODE_CLASSES:
        if sum(1 for _, kind in cls.FIELDS if kind in (CHILDREN, BINDERS)) > 1:
            raise TypeError(f"{cls.__name__}.FIELDS has more than one sequence field")


_one_sequence_field()


def rebuild(node: Expr, kids: Sequence[Expr]) -> Expr:
    """A new node of ``node``'s class with the sub-expressions ``kids`` (in ``FIELDS``
    order, as :func:`passhost.ir.children` gives them) and ``node``'s data fields, built
    through the class's constructor (so it is checked like any new node)."""
    cls = type(node)
    kwargs: dict = {}
    fields = cls.FIELDS
    singles = sum(1 for _, kind in fields if kind in (CHILD, BINDER))
    i = 0
    for name, kind in fields:
        if kind is CHILD or kind is BINDER:
            kwargs[name] = kids[i]
            i += 1
        elif kind is CHILDREN or kind is BINDERS:  # the one sequence field takes the rest
            n = len(kids) - singles
            kwargs[name] = tuple(kids[i:i + n])
            i += n
        else:
            kwargs[name] = getattr(node, name)
    return cls(**kwargs)
