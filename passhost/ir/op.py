"""The operator registry.

Every operator is an :class:`Op` node (one object per name, ``Op.get("add") is
Op.get("add")``) carrying its :class:`OpDef`: arity, declared attributes with
defaults, a type relation, a numpy kernel, a fusion pattern and a stateful flag.
Core operators are registered when :mod:`passhost.ir` is imported; plugins add
more through the ``passhost_register_ops`` hook (see :func:`register_op`).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Mapping, Optional

from ..errors import IRError
from .expr import EMPTY_ATTRS, Attrs, Expr, _freeze

__all__ = ["Op", "OpDef", "OpPattern", "register_op", "list_ops"]

_set = object.__setattr__


class OpPattern(IntEnum):
    """Fusion pattern kinds, with TVM's numeric values (they are compared with ``<=``)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


#: ``type_rel(arg_types, attrs) -> Type``. ``arg_types`` is a list whose ``None``
#: entries are not known yet (untyped variables); the relation may fill them in.
TypeRel = Callable[[list, Attrs], Any]
#: ``compute(args, attrs) -> ndarray | tuple[ndarray, ...]``
Kernel = Callable[[list, Attrs], Any]


@dataclass(frozen=True)
class OpDef:
    """The definition of one operator (also the record plugins yield as ``OpEntry``).

    :param name: the name used in the IR (``"nn.conv2d"``)
    :param num_inputs: number of arguments, or ``-1`` for any number
    :param attrs: declared attributes ``(name, default)`` in declaration (print) order
    :param type_rel: shape/dtype inference, ``type_rel(arg_types, attrs) -> Type``
    :param compute: numpy kernel, ``compute(args, attrs) -> ndarray | tuple``
    :param pattern: fusion pattern kind (:class:`OpPattern`)
    :param stateful: calls must never be folded, merged or removed
    :param summary: one line for ``passhost list`` and docs
    :param attr_check: optional ``attr_check(attrs)`` raising :class:`IRError`
    :param extra: free-form properties other passes may read (e.g. layout handling)
    """

    name: str
    num_inputs: int
    type_rel: TypeRel
    compute: Optional[Kernel] = None
    attrs: tuple = ()
    pattern: int = OpPattern.OPAQUE
    stateful: bool = False
    summary: str = ""
    attr_check: Optional[Callable[[Attrs], None]] = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class Op(Expr):
    """A primitive operator, referenced from :class:`~passhost.ir.Call` nodes.

    Use :meth:`Op.get`; ops are never constructed directly.
    """

    __slots__ = ("name", "_def", "_defaults", "_keys")

    _registry: dict = {}

    def __init__(self, opdef: OpDef) -> None:
        _set(self, "name", opdef.name)
        _set(self, "_def", opdef)
        defaults = Attrs(opdef.attrs) if opdef.attrs else EMPTY_ATTRS
        _set(self, "_defaults", defaults)
        _set(self, "_keys", frozenset(k for k, _ in opdef.attrs))
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
        """Validate ``attrs`` against the declaration and fill in defaults."""
        if not attrs:
            return self._defaults
        if type(attrs) is Attrs and attrs.keys() == self._keys:
            return attrs
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


def register_op(opdef: OpDef, *, override: bool = False) -> Op:
    """Register an operator and return its :class:`Op`.

    :raises IRError: if the name is taken (unless ``override``) or the record is malformed
    """
    if not isinstance(opdef, OpDef):
        raise IRError(f"register_op needs an OpDef/OpEntry, got {type(opdef).__name__}")
    if not isinstance(opdef.name, str) or not opdef.name:
        raise IRError(f"operator name must be a non-empty string, got {opdef.name!r}")
    if not callable(opdef.type_rel):
        raise IRError(f"operator {opdef.name}: type_rel must be callable")
    if opdef.compute is not None and not callable(opdef.compute):
        raise IRError(f"operator {opdef.name}: compute must be callable")
    try:
        OpPattern(opdef.pattern)
    except ValueError:
        raise IRError(f"operator {opdef.name}: unknown pattern kind {opdef.pattern!r}") from None
    for item in opdef.attrs:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise IRError(f"operator {opdef.name}: attrs must be (name, default) pairs, got {item!r}")
    if opdef.name in Op._registry and not override:
        raise IRError(f"operator {opdef.name} is already registered")
    op = Op(opdef)
    Op._registry[opdef.name] = op
    return op


def list_ops() -> list:
    """Names of all registered operators, sorted."""
    return sorted(Op._registry)


# re-exported for attr normalisation elsewhere
freeze_attr_value = _freeze
