"""The walk: one bottom-up rebuild of a graph that offers each node to a rule table.

Every rewriting pass of the host and of the first-party plugins runs on this loop: through
a :class:`~.table.RuleTable` of its own, through the pattern language's ``rewrite``, or
through :func:`~passhost.ir.rewrite_post_order`. In post order (explicit stack: a
100,000-deep chain is fine), each node is

1. rebuilt from its already-rewritten children -- the node itself when none changed, so an
   unchanged sub-graph keeps its identity and its types;
2. typed as the :mod:`typing policy <.typing_policy>` says;
3. offered to the table's rule for its root (a call's operator, another node's class),
   whose result, if any, replaces it everywhere above.

Shared sub-expressions are rewritten once and stay shared. ``memo`` substitutes nodes
(``{old: new}``, e.g. variables) and gets an entry for every node that changed; ``bind``
substitutes a ``let``'s variable in its body::

    let %a = add(%x, 1f); multiply(%a, 2f)
    walk(expr, None, bind=lambda var, value: value)   ->  multiply(add(%x, 1f), 2f)
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .._gc import gc_paused
from ..expr import MAP_USES as _MAP_USES
from ..expr import Call, Constant, Expr, GlobalVar, Let, Op, Var
from ..visitor import post_order, with_children
from .table import RuleTable
from .typing_policy import NO_TYPES, Typing, keep_rebuilt, rebuild_let, type_like

__all__ = ["walk"]

_NO_RULES = ({}, None, {})  # a table with no rule: (by operator, for any call, by class)


@gc_paused
def walk(root: Expr, table: Optional[RuleTable] = None, typing: Typing = NO_TYPES,
         memo: Optional[dict] = None, skip: Optional[Callable[[Expr], bool]] = None,
         order: Optional[list] = None, bind: Optional[Callable[[Var, Expr], Optional[Expr]]] = None) -> Expr:
    """``root`` rebuilt bottom-up, each node offered to ``table`` (see the module docs).

    :param table: the rules; ``None`` offers nothing (the walk only substitutes what
        ``memo`` and ``bind`` say, with no Python call per node)
    :param typing: what is written into ``checked_type`` (:mod:`.typing_policy`)
    :param memo: ``{old: new}`` substitutions; the walk adds an entry for every node it
        changes (a node left as it is gets none)
    :param skip: nodes for which this is true are kept as they are, children unvisited
    :param order: ``post_order(root, skip=skip, visited=set(memo))`` when the caller has it
        (walked as given, not recomputed); operators may be left out of it
    :param bind: ``bind(var, value)`` is called for every ``let`` once its value is
        rewritten, before any node of its body: an expression it returns replaces ``var``
        everywhere in the body and the let disappears into its body; ``None`` leaves the
        let alone. A let's variable is a binding site: renamed through ``memo`` (a fresh
        copy), never replaced by an expression
    :returns: the rewritten root (``root`` itself when nothing changed)
    """
    if memo is None:
        memo = {}
    if order is None:
        order = post_order(root, skip=skip, visited=set(memo))
    if table is None:
        dispatch, pair, classes = _NO_RULES, False, frozenset()
    else:
        dispatch, pair, classes = table.dispatch(), table.with_original, table.classes_only()
    kinds = set(map(type, order)) if bind is not None or classes is not None else None
    if classes is not None and not memo and (bind is None or Let not in kinds) and not classes & kinds:
        return root  # nothing to offer a rule and nothing to substitute: nothing changes
    waiting = _lets_to_bind(order) if bind is not None and Let in kinds else {}
    return _rebuild(root, order, memo, dispatch, pair, typing, skip, bind, waiting)


def _lets_to_bind(order: list) -> dict:
    """node -> the lets to bind once it is done: a let's value, whose rewrite is final then
    (listed inside the let, or earlier when shared); for a leaf value (a variable, maybe an
    outer let's, substituted by then) the let's own variable, listed as the let is entered.
    Either way before any node of the let's body."""
    waiting: dict = {}
    leaves = (Var, Constant, Op, GlobalVar)
    for node in order:
        if type(node) is Let:
            value = node.value
            waiting.setdefault(node.var if type(value) in leaves else value, []).append(node)
    return waiting


# hot loop: this is the one loop every rewriting pass runs, once per node of the graph; calls
# (every walker's common case) and lets (the long chains of A-normal form) are unrolled in it,
# and splitting it into helpers would add a Python call per node (measured in
# docs/performance-log.md: the driver's own cost decides the rule passes' speed)
def _rebuild(root: Expr, order: list, memo: dict, dispatch: tuple, pair: bool, typing: Typing,
             skip: Any, bind: Any, waiting: dict) -> Expr:
    get = memo.get
    by_op, for_calls, by_class = dispatch
    rule_for_op = by_op.get
    rule_for_class = by_class.get
    keep_any_call, keep_op_call = typing.keeps_calls()
    keep, keep_let = typing.keep, typing.keep or typing.like
    infer = typing.infer()
    _Call, _Op, _Var, _Constant, _GlobalVar, _Let = Call, Op, Var, Constant, GlobalVar, Let
    map_uses = _MAP_USES
    bound: set = set()  # the variables bind replaced
    for node in order:
        t = type(node)
        if t is _Call:
            op = node.op
            nop = get(op, op)
            args = node.args
            n = len(args)
            if n == 2:  # (the usual calls, unrolled)
                a, b = args
                na, nb = get(a, a), get(b, b)
                nargs = None if na is a and nb is b else (na, nb)
            elif n == 1:
                a = args[0]
                na = get(a, a)
                nargs = None if na is a else (na,)
            else:
                nargs = None
                for i, a in enumerate(args):
                    na = get(a, a)
                    if na is not a:
                        if nargs is None:
                            nargs = list(args)
                        nargs[i] = na
            if nop is not op:
                new = Call(nop, args if nargs is None else nargs,
                           node.attrs if type(nop) is type(op) else None)
            elif nargs is not None:
                new = node.with_args(nargs if type(nargs) is tuple else tuple(nargs),
                                     keep_any_call or (keep_op_call and type(op) is _Op))
            else:
                new = node
            rule = rule_for_op(op, for_calls)
        elif t is _Constant or t is _Var or t is _Op or t is _GlobalVar:
            new = node
            rule = rule_for_class(t)
        elif skip is not None and skip(node):
            new = node
            rule = rule_for_class(t)
        elif t is _Let:  # (unrolled: let chains are long; its variable is renamed, never replaced)
            value, body = node.value, node.body
            nv, nb = get(value, value), get(body, body)
            var = node.var
            if var in bound:  # bind replaced every use: the let disappears into its body
                memo[node] = nb
                if waiting and node in waiting:
                    _bind(waiting[node], bind, memo, bound)
                continue
            nvar = get(var, var)
            if nvar is not var and type(nvar) is not _Var:
                nvar = var  # a binding site is renamed (a fresh copy), never replaced
            if nv is value and nb is body and nvar is var:
                new = node
            else:
                new = rebuild_let(node, nvar, nv, nb, keep_let)
            rule = rule_for_class(t)
        else:
            new = with_children(node, map_uses[t](node, get))
            rule = rule_for_class(t)
        if new is node:  # unchanged so far (most nodes): only the rule can replace it
            if rule is not None:
                r = rule(node, node) if pair else rule(node)
                if r is not None:
                    new = r
        else:
            if keep and new._checked_type is None:
                keep_rebuilt(node, new)
            if rule is not None:
                r = rule(new, node) if pair else rule(new)
                if r is not None:
                    new = r
        if new is not node:
            if infer is not None and new._checked_type is None:
                type_like(node, new, infer)
            memo[node] = new
        if waiting and node in waiting:
            _bind(waiting[node], bind, memo, bound)
    return get(root, root)


def _bind(lets: list, bind: Callable, memo: dict, bound: set) -> None:
    for let in lets:
        r = bind(let.var, memo.get(let.value, let.value))
        if r is not None:
            memo[let.var] = r
            bound.add(let.var)
