"""What a rewrite writes into ``checked_type``: the engine's typing policies, and the only
code of the engine that sets a type.

A rewrite rebuilds every node above a replacement, and it may bring in new nodes. A pass
that runs type inference afterwards pays for every node it left untyped, so a rewrite says
which of two promises its rules keep, and the engine types what it builds accordingly:

``NO_TYPES``
    nothing is promised: rebuilt and new nodes are left untyped.
``KEEP_TYPES``
    the rules preserve types (CSE, constant folding, dead code): a node rebuilt because a
    child was replaced keeps its original's type when all its new children are typed, as
    TVM's copy-on-write rebuild does; only what a rule builds is left to inference::

        before: add(exp(%x), 1f) /* ty=T */    rule: exp(%x) -> %y  (typed T)
        after:  add(%y, 1f) /* ty=T */         (the original's type, no inference)

``like_originals(mod)``
    each replacement has its original's type (SimplifyInference, FoldScaleAxis, pattern
    rules): rebuilt calls keep their type before the rules see them, and whatever finally
    stands for a typed original and has no type yet takes the original's type when its
    children are typed, or is inferred on its own (only its untyped nodes are visited;
    ``mod`` types calls of its global functions). An untyped original gives no type; a
    replacement that has a type keeps it.

The walk (:mod:`.walk`) reads a policy's two flags once and calls this module's functions
where a type may be written; a rebuilt call keeps its type through
``Call.with_args(args, keep_type)``, the flag given by the policy (:meth:`Typing.keeps_calls`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..expr import _let_body, _let_value, _let_var, _new, _set_span, _set_type
from ..expr import Expr, Let, Op
from ..visitor import children, keep_checked_type

__all__ = ["Typing", "NO_TYPES", "KEEP_TYPES", "like_originals", "rebuild_let", "keep_rebuilt",
           "type_like", "typed_for_matching"]


@dataclass(frozen=True)
class Typing:
    """A typing policy (see the module docs).

    :param keep: a node rebuilt because a child was replaced keeps its original's type
        (when its children are typed) before the rule sees it
    :param like: what finally stands for a typed original is typed like it
    :param mod: with ``like``, the module whose global functions typing may need
    """

    keep: bool = False
    like: bool = False
    mod: Any = None

    def keeps_calls(self) -> tuple:
        """``(any callee, operator callees)``: whether a call rebuilt with new arguments
        keeps its type (``Call.with_args``) for any callee, or for an operator callee only
        (``keep`` keeps :func:`~passhost.ir.keep_checked_type`'s rule: a non-operator callee
        must be typed too, which ``with_args`` does not check)."""
        return self.like, self.keep

    def infer(self) -> Optional[Callable[[Expr], Any]]:
        """The local inference ``like`` falls back on (``None`` without ``like``)."""
        if not self.like:
            return None
        from ..type_infer import infer_type

        mod = self.mod

        def infer(e: Expr) -> Any:
            return infer_type(e, mod=mod)

        return infer


NO_TYPES = Typing()
KEEP_TYPES = Typing(keep=True)


def like_originals(mod: Any = None) -> Typing:
    """The policy of rules whose every replacement has the type of the node it replaces."""
    return Typing(like=True, mod=mod)


def rebuild_let(old: Let, var: Any, value: Expr, body: Expr, keep: bool) -> Let:
    """``old`` with a new variable, value or body (the walk's let path: let chains are long,
    so this builds the node directly from its checked parts). With ``keep`` it takes
    ``old``'s type when the three parts are typed; it keeps ``old``'s span."""
    new = _new(Let)
    _let_var(new, var)
    _let_value(new, value)
    _let_body(new, body)
    ty = old._checked_type
    if (ty is not None and keep and var._checked_type is not None and value._checked_type is not None
            and body._checked_type is not None):
        _set_type(new, ty)
    else:
        _set_type(new, None)
    _set_span(new, old._span)
    return new


def keep_rebuilt(old: Expr, new: Expr) -> None:
    """``keep``: ``new``, a rebuild of ``old``, takes ``old``'s type when its children are
    typed (:func:`~passhost.ir.keep_checked_type`)."""
    keep_checked_type(old, new)


def type_like(old: Expr, new: Expr, infer: Callable[[Expr], Any]) -> None:
    """``like``: ``new`` stands for ``old`` and has no type yet: ``old``'s type when every
    child of ``new`` is typed (or an operator), else ``new`` inferred on its own."""
    ty = old._checked_type
    if ty is None:
        return
    for k in children(new):
        if k._checked_type is None and type(k) is not Op:
            infer(new)
            return
    new._set_checked_type(ty)


def typed_for_matching(expr: Expr, mod: Any = None) -> Expr:
    """``expr`` typed before rules that read types match it (``require_type``): inferred in
    ``mod``'s context when it has no type yet, else as it is."""
    if expr._checked_type is None:
        from ..type_infer import infer_type

        out = infer_type(expr, mod=mod)
        return out if isinstance(out, Expr) else expr
    return expr
