"""The rewrite driver: :func:`rewrite_post_order`, the one loop every rewriting pass of
the host and of the first-party plugins runs on (directly, through the pattern language's
``rewrite``, or through ``bind`` for let substitution)::

    rewrite_post_order(fn, lambda call: ir.nn.relu(call.args[0]), only=frozenset({Op.get("tanh")}))
    # tanh(%x) -> nn.relu(%x), every other node rebuilt only if a child changed
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Optional

from ._gc import gc_paused
from .expr import MAP_USES as _MAP_USES
from .expr import Call, Constant, Expr, GlobalVar, Let, Op, Var, set_span
from .visitor import children, keep_checked_type, post_order, with_children

__all__ = ["rewrite_post_order"]


@gc_paused
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
    """Rebuild ``root`` bottom-up.

    Each node is first rebuilt with its already-rewritten children (identity kept when
    none changed), then ``rewrite(node)`` may return a replacement (or ``None`` to keep
    it). Shared sub-expressions are rewritten once and stay shared. A call whose callee
    is unchanged is rebuilt with :meth:`Call.with_args` (same callee and attrs, checks
    not repeated). ``rewrite=None`` offers nothing: the walk only substitutes what
    ``memo`` and ``bind`` say (no Python call per node)::

        rewrite_post_order(body, None, memo={x: y})   # body with %x replaced by %y

    :param mod: the module ``root`` belongs to: with ``type_like``, what is typed afresh
        takes the types of the global functions it calls from it

    :param memo: ``{old: new}``; pre-seed it to substitute nodes (e.g. variables). The
        walk adds an entry for every node it changes (a node left as it is gets none)
    :param skip: nodes for which this is true are kept as they are, children unvisited
    :param keep_types: for type-preserving rewrites (CSE, constant folding): a node
        rebuilt because a child was replaced keeps the old node's ``checked_type``
        when all its new children are typed — as TVM's copy-on-write rebuild does —
        so type inference afterwards only has to type genuinely new nodes
    :param with_original: call ``rewrite(new, old)`` instead: ``new`` is the node
        rebuilt from the rewritten children, ``old`` the original node of ``root``
        (still typed when ``root`` was, with its original children), so a rule can
        read the original's ``checked_type`` and arguments
    :param type_like: for rewrites whose every replacement has the type of the node
        it replaces: the node that finally stands for a typed original (rebuilt or
        returned by ``rewrite``) and has no type yet is typed like the original — it
        takes the original's ``checked_type`` when all its children are typed (or
        ``Op``), otherwise it is type-inferred on its own with ``infer_type``, which
        visits only its untyped nodes. A rebuilt call (same callee) keeps the
        original's type when all its arguments are typed (:meth:`Call.with_args`),
        before ``rewrite`` sees it. An untyped original gives no type; a replacement
        that already has a type keeps it. So the type inference after the pass has
        nothing left to do
    :param order: ``post_order(root, skip=skip, visited=set(memo))`` when the caller has
        already computed it (it is walked as given, not recomputed)
    :param only: offer ``rewrite`` only the calls whose callee is in this set (operators)
        and the nodes whose class is in it (``TupleGetItem``, ...): what a rule driver
        indexed by root knows can match. Every other node is still rebuilt, never
        offered, so it costs a set lookup instead of a Python call
    :param bind: ``bind(var, value)`` is called for every ``let`` once its value is
        rewritten (``value`` is the new one), before any node of its body; an expression
        it returns replaces ``var`` everywhere in the body (a substitution: constant
        propagation, inlining a single use) and the let disappears into its body; ``None``
        leaves the variable and its let alone (rebuilt and offered to ``rewrite`` as
        usual)::

            let %a = add(%x, 1f); multiply(%a, 2f)
            # bind=lambda v, e: e if v is a else None
            ->  multiply(add(%x, 1f), 2f)
    """
    if memo is None:
        memo = {}
    if rewrite is None:
        only = frozenset()  # nothing to offer: the walk substitutes and binds
    get = memo.get
    if order is None:
        order = post_order(root, skip=skip, visited=set(memo))
    infer = None
    if type_like:
        from .type_infer import infer_type

        def infer(e: Expr) -> Any:
            return infer_type(e, mod=mod)
    _Call, _Op, _Var, _Constant, _GlobalVar, _Let = Call, Op, Var, Constant, GlobalVar, Let
    map_uses = _MAP_USES
    # bind: node -> the lets to bind once it is done: a let's value, whose rewrite is final
    # then (listed inside the let, or earlier when shared); for a leaf value (a variable,
    # maybe an outer let's, substituted by then) the let's own variable, listed as the let
    # is entered. Either way before any node of the let's body.
    waiting: dict = {}
    bound: set = set()  # the variables bind replaced
    by_class = only is not None and not memo and all(isinstance(k, type) for k in only)
    kinds = set(map(type, order)) if bind is not None or by_class else None
    if by_class and (bind is None or Let not in kinds) and not only.intersection(kinds):
        return root  # nothing to offer the rule and nothing to substitute: nothing changes
    if bind is not None and Let in kinds:
        leaves = (Var, Constant, Op, GlobalVar)
        for node in order:
            if type(node) is Let:
                value = node.value
                waiting.setdefault(node.var if type(value) in leaves else value, []).append(node)
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
                # keep_types alone keeps keep_checked_type's rule (a non-Op callee must be typed)
                new = node.with_args(nargs if type(nargs) is tuple else tuple(nargs),
                                     type_like or (keep_types and type(op) is _Op))
            else:
                new = node
        elif t is _Constant or t is _Var or t is _Op or t is _GlobalVar:
            new = node
        elif skip is not None and skip(node):
            new = node
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
                new = Let(nvar, nv, nb)
                span = node._span
                if span is not None:
                    set_span(new, span)
                ty = node._checked_type
                if (ty is not None and (keep_types or type_like) and nvar._checked_type is not None
                        and nv._checked_type is not None and nb._checked_type is not None):
                    new._set_checked_type(ty)  # keep_checked_type's rule, in line
        else:
            new = with_children(node, map_uses[t](node, get))
        offered = only is None or t in only or (t is _Call and node.op in only)
        if new is node:  # unchanged so far (most nodes): only the rule can replace it
            if offered:
                r = rewrite(node, node) if with_original else rewrite(node)
                if r is not None:
                    new = r
        else:
            if keep_types and new._checked_type is None:
                keep_checked_type(node, new)
            if offered:
                r = rewrite(new, node) if with_original else rewrite(new)
                if r is not None:
                    new = r
        if new is not node:
            if infer is not None and new._checked_type is None:
                ty = node._checked_type
                if ty is not None:
                    for k in children(new):
                        if k._checked_type is None and type(k) is not _Op:
                            infer(new)
                            break
                    else:
                        new._set_checked_type(ty)
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
