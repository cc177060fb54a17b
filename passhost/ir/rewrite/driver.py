""":func:`rewrite_post_order`: the walk behind one function and keyword arguments.

It is the engine's older spelling, kept because passes and users call it: each of its
arguments says which part of the engine it selects -- the rule table (``rewrite``,
``only``, ``with_original``), the typing policy (``keep_types``, ``type_like``, ``mod``)
and the walk's own substitutions (``memo``, ``bind``, ``skip``, ``order``)::

    rewrite_post_order(fn, lambda call: ir.nn.relu(call.args[0]), only=frozenset({Op.get("tanh")}))
    # is
    walk(fn, RuleTable([(Op.get("tanh"), lambda call: ir.nn.relu(call.args[0]))]))
    # tanh(%x) -> nn.relu(%x), every other node rebuilt only if a child changed
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Optional

from ..expr import Expr, Var
from .table import RuleTable
from .typing_policy import Typing
from .walk import walk

__all__ = ["rewrite_post_order"]


def rewrite_post_order(root: Expr, rewrite: Optional[Callable[..., Optional[Expr]]],
                       memo: Optional[dict] = None,
                       skip: Optional[Callable[[Expr], bool]] = None,
                       keep_types: bool = False,
                       with_original: bool = False,
                       type_like: bool = False,
                       order: Optional[list] = None,
                       only: Optional[AbstractSet] = None,
                       bind: Optional[Callable[[Var, Expr], Optional[Expr]]] = None,
                       mod: Any = None) -> Expr:
    """Rebuild ``root`` bottom-up: each node rebuilt with its already-rewritten children
    (identity kept when none changed), then ``rewrite(node)`` may return a replacement (or
    ``None`` to keep it). Shared sub-expressions are rewritten once and stay shared.
    ``rewrite=None`` offers nothing: the walk only substitutes what ``memo`` and ``bind``
    say::

        rewrite_post_order(body, None, memo={x: y})   # body with %x replaced by %y

    The rule table (:class:`~passhost.ir.rewrite.RuleTable`):

    :param rewrite: the one rule
    :param only: offer ``rewrite`` only the calls whose callee is in this set (operators)
        and the nodes whose class is in it (``TupleGetItem``, ...): the table's roots. A
        set of classes none of which occurs (and no ``memo`` or ``bind`` work) returns
        ``root`` without rebuilding anything
    :param with_original: call ``rewrite(new, old)``: ``new`` is the node rebuilt from the
        rewritten children, ``old`` the original node of ``root`` (still typed when
        ``root`` was, with its original children)

    The typing policy (:mod:`passhost.ir.rewrite.typing_policy`):

    :param keep_types: for type-preserving rewrites (CSE, constant folding): a node
        rebuilt because a child was replaced keeps the old node's ``checked_type`` when
        all its new children are typed -- as TVM's copy-on-write rebuild does
    :param type_like: for rewrites whose every replacement has the type of the node it
        replaces: what finally stands for a typed original and has no type yet takes the
        original's type when its children are typed, or is inferred on its own; a rebuilt
        call keeps its type before ``rewrite`` sees it. An untyped original gives no type;
        a replacement that already has a type keeps it
    :param mod: with ``type_like``, the module whose global functions typing may need

    The walk (:func:`~passhost.ir.rewrite.walk`):

    :param memo: ``{old: new}``; pre-seed it to substitute nodes (e.g. variables). The
        walk adds an entry for every node it changes
    :param skip: nodes for which this is true are kept as they are, children unvisited
    :param order: ``post_order(root, skip=skip, visited=set(memo))`` when the caller has
        already computed it (walked as given, not recomputed)
    :param bind: ``bind(var, value)`` for every ``let`` once its value is rewritten,
        before its body: an expression it returns replaces ``var`` in the body and the let
        disappears; ``None`` leaves the let alone::

            let %a = add(%x, 1f); multiply(%a, 2f)
            # bind=lambda v, e: e if v is a else None
            ->  multiply(add(%x, 1f), 2f)
    """
    table = None
    if rewrite is not None:
        table = RuleTable([(None if only is None else list(only), rewrite)], with_original=with_original)
    return walk(root, table, Typing(keep=keep_types, like=type_like, mod=mod), memo, skip, order, bind)
