"""The operator registry.

Every operator is an :class:`Op` node (one object per name, ``Op.get("add") is
Op.get("add")``) carrying its :class:`OpDef`: arity, declared attributes with
defaults, a type relation, a numpy kernel, a fusion pattern and a stateful flag.
Core operators are registered when :mod:`passhost.ir` is imported; plugins add
more through the ``passhost_register_ops`` hook (see :func:`register_op`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Mapping, Optional

from ..errors import IRError
from .expr import Attrs, Op, _freeze

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
