"""Pattern nodes and their constructors (TVM's ``wildcard``, ``is_op``, ...)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ...errors import IRError
from ..expr import Expr
from ..op import Op
from ..types import Type


class DFPattern:
    """Base of every pattern node. Patterns compare by identity, as TVM's do."""

    __slots__ = ("__weakref__",)

    def __call__(self, *args: "DFPattern") -> "CallPattern":
        return CallPattern(self, [_lift(a) for a in args])

    def __or__(self, other: "DFPattern") -> "AltPattern":
        return AltPattern(self, _lift(other))

    def __add__(self, other):
        return is_op("add")(self, other)

    def __sub__(self, other):
        return is_op("subtract")(self, other)

    def __mul__(self, other):
        return is_op("multiply")(self, other)

    def __truediv__(self, other):
        return is_op("divide")(self, other)

    def has_attr(self, attrs: dict) -> "AttrPattern":
        """This pattern, where the matched call's (or function's) attributes include ``attrs``."""
        return AttrPattern(self, attrs)

    def has_type(self, ttype: Type) -> "TypePattern":
        return TypePattern(self, ttype)

    def has_dtype(self, dtype: str) -> "DataTypePattern":
        return DataTypePattern(self, dtype)

    def has_shape(self, shape: Sequence[int]) -> "ShapePattern":
        return ShapePattern(self, shape)

    def optional(self, option_constructor: Callable[["DFPattern"], "DFPattern"]) -> "AltPattern":
        """``self | option_constructor(self)``: e.g. ``conv.optional(lambda x: is_op("nn.relu")(x))``."""
        return self | option_constructor(self)

    def dominates(self, parent: "DFPattern", path: Optional["DFPattern"] = None) -> "DominatorPattern":
        return DominatorPattern(parent, path if path is not None else wildcard(), self)

    def match(self, expr: Expr) -> bool:
        """Whether ``expr`` (and the graph below it) is matched by this pattern."""
        from .match import _Matcher

        return _Matcher().match(self, expr)

    def partition(self, expr: Expr, attrs: Optional[dict] = None,
                  check: Optional[Callable[[Expr], bool]] = None) -> Expr:
        from .partition import partition

        return partition(self, expr, attrs, check)


class WildcardPattern(DFPattern):
    """Matches any expression."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "*"


class ExprPattern(DFPattern):
    """Matches one expression: an ``Op`` by name, anything else structurally."""

    __slots__ = ("expr",)

    def __init__(self, expr: Expr) -> None:
        self.expr = expr

    def __repr__(self) -> str:
        return self.expr.name if isinstance(self.expr, Op) else f"is_expr({type(self.expr).__name__})"


class VarPattern(DFPattern):
    """Matches a variable; with a name, only the variable of that ``name_hint``."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"is_var({self.name!r})" if self.name else "is_var()"


class ConstantPattern(DFPattern):
    """Matches a constant."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "is_constant()"


class CallPattern(DFPattern):
    """Matches a call whose callee matches ``op`` and whose arguments match ``args``
    (``args=None``: any arguments)."""

    __slots__ = ("op", "args")

    def __init__(self, op: DFPattern, args: Optional[Sequence[DFPattern]]) -> None:
        self.op = op
        self.args = None if args is None else tuple(args)

    def __repr__(self) -> str:
        inner = "..." if self.args is None else ", ".join(map(repr, self.args))
        return f"{self.op!r}({inner})"


class TuplePattern(DFPattern):
    __slots__ = ("fields",)

    def __init__(self, fields: Optional[Sequence[DFPattern]]) -> None:
        self.fields = None if fields is None else tuple(_lift(f) for f in fields)

    def __repr__(self) -> str:
        return "(" + ("..." if self.fields is None else ", ".join(map(repr, self.fields))) + ")"


class TupleGetItemPattern(DFPattern):
    """Matches ``tuple.index``; ``index`` -1 (or None) matches any index."""

    __slots__ = ("tuple", "index")

    def __init__(self, tuple_value: DFPattern, index: Optional[int] = None) -> None:
        self.tuple = _lift(tuple_value)
        self.index = -1 if index is None else int(index)

    def __repr__(self) -> str:
        return f"{self.tuple!r}.{self.index if self.index >= 0 else '*'}"


class AltPattern(DFPattern):
    """Matches what ``left`` matches, else what ``right`` matches."""

    __slots__ = ("left", "right", "by_op")

    def __init__(self, left: DFPattern, right: DFPattern) -> None:
        self.left, self.right = left, right
        #: for an alternation of bare operators, the matcher's table of them (built on
        #: first use; see ``match._op_table``)
        self.by_op = None

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


class _Refine(DFPattern):
    __slots__ = ("pattern",)


class TypePattern(_Refine):
    __slots__ = ("type",)

    def __init__(self, pattern: DFPattern, ttype: Type) -> None:
        self.pattern, self.type = pattern, ttype

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_type({self.type})"


class DataTypePattern(_Refine):
    __slots__ = ("dtype",)

    def __init__(self, pattern: DFPattern, dtype: str) -> None:
        self.pattern, self.dtype = pattern, str(dtype)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_dtype({self.dtype!r})"


class ShapePattern(_Refine):
    __slots__ = ("shape",)

    def __init__(self, pattern: DFPattern, shape: Sequence[int]) -> None:
        self.pattern, self.shape = pattern, tuple(int(d) for d in shape)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_shape({list(self.shape)})"


class AttrPattern(_Refine):
    __slots__ = ("attrs",)

    def __init__(self, pattern: DFPattern, attrs: dict) -> None:
        if not isinstance(attrs, dict):
            raise IRError(f"has_attr takes a dict of attribute values, got {attrs!r}")
        self.pattern, self.attrs = pattern, dict(attrs)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_attr({self.attrs!r})"


class DominatorPattern(DFPattern):
    """``child``, every path from which up to ``parent`` goes only through nodes matching ``path``."""

    __slots__ = ("parent", "path", "child")

    def __init__(self, parent: DFPattern, path: DFPattern, child: DFPattern) -> None:
        self.parent, self.path, self.child = _lift(parent), _lift(path), _lift(child)

    def __repr__(self) -> str:
        return f"dominates({self.parent!r}, {self.path!r}, {self.child!r})"


class IfPattern(DFPattern):
    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: DFPattern, true_branch: DFPattern, false_branch: DFPattern) -> None:
        self.cond, self.true_branch, self.false_branch = _lift(cond), _lift(true_branch), _lift(false_branch)


class LetPattern(DFPattern):
    __slots__ = ("var", "value", "body")

    def __init__(self, var: DFPattern, value: DFPattern, body: DFPattern) -> None:
        self.var, self.value, self.body = _lift(var), _lift(value), _lift(body)


class FunctionPattern(DFPattern):
    __slots__ = ("params", "body")

    def __init__(self, params: Optional[Sequence[DFPattern]], body: DFPattern) -> None:
        self.params = None if params is None else tuple(_lift(p) for p in params)
        self.body = _lift(body)


def _lift(value: Any) -> DFPattern:
    if isinstance(value, DFPattern):
        return value
    if isinstance(value, Expr):
        return ExprPattern(value)
    raise IRError(f"expected a pattern or an expression, got {value!r}")


# --- constructors (TVM's names) -------------------------------------------------------

def wildcard() -> WildcardPattern:
    return WildcardPattern()


def is_op(op_name: str) -> ExprPattern:
    """The operator ``op_name``; call it with argument patterns: ``is_op("add")(x, y)``."""
    return ExprPattern(Op.get(op_name))


def is_constant() -> ConstantPattern:
    return ConstantPattern()


def is_var(name: str = "") -> VarPattern:
    return VarPattern(name)


def is_expr(expr: Expr) -> ExprPattern:
    return ExprPattern(expr)


def is_tuple(fields: Optional[Sequence[DFPattern]]) -> TuplePattern:
    return TuplePattern(fields)


def is_tuple_get_item(tuple_value: DFPattern, index: Optional[int] = None) -> TupleGetItemPattern:
    return TupleGetItemPattern(tuple_value, index)


def is_if(cond: DFPattern, true_branch: DFPattern, false_branch: DFPattern) -> IfPattern:
    return IfPattern(cond, true_branch, false_branch)


def is_let(var: DFPattern, value: DFPattern, body: DFPattern) -> LetPattern:
    return LetPattern(var, value, body)


def has_attr(attrs: dict, pattern: Optional[DFPattern] = None) -> AttrPattern:
    return AttrPattern(pattern if pattern is not None else wildcard(), attrs)


def has_type(ttype: Type, pattern: Optional[DFPattern] = None) -> TypePattern:
    return TypePattern(pattern if pattern is not None else wildcard(), ttype)


def has_dtype(dtype: str, pattern: Optional[DFPattern] = None) -> DataTypePattern:
    return DataTypePattern(pattern if pattern is not None else wildcard(), dtype)


def has_shape(shape: Sequence[int], pattern: Optional[DFPattern] = None) -> ShapePattern:
    return ShapePattern(pattern if pattern is not None else wildcard(), shape)


def dominates(parent: DFPattern, path: DFPattern, child: DFPattern) -> DominatorPattern:
    return DominatorPattern(parent, path, child)
