"""EliminateCommonSubexpr: merge operator calls (and tuple projections) that compute the same value.

The algorithm of TVM's ``relay.transform.EliminateCommonSubexpr``
(``eliminate_common_subexpr.cc``): a post-order rewrite over the whole function
(nested functions and let values included) that remembers every call it keeps.

* A call ``f(args, attrs)`` is looked up among the earlier calls of the **same
  operator**: it matches one whose attrs are structurally equal and whose arguments
  are pairwise *equivalent* -- the very same node, or two **scalar** constants of equal
  dtype and value; two ``Tuple`` arguments are compared field by field with the same
  rule (one level deep). On a match the earlier call replaces this one; otherwise this
  call is recorded. Calls with no arguments, calls of non-operators, calls of stateful
  operators (``nn.dropout``) and calls ``fskip`` rejects are kept and never recorded.
* ``t.i`` is replaced by an earlier ``t.i`` of the same tuple node.
* Because the rewrite is post-order, merges cascade upwards.

TVM compares each call with every earlier call of the same operator, which is
quadratic on long chains; here the equivalence above is turned into a hash key, so
the pass is linear in the size of the graph and finds exactly TVM's matches. The
walk, the rewrite and the look-ups are one loop (see :func:`_cse`).

Before::

    def @main(%x: Tensor[(1, 16), float32]) {
      %0 = nn.relu(%x);
      %1 = nn.relu(%x);
      %2 = add(%0, 1f);
      %3 = add(%1, 1f);
      add(%2, %3)
    }

After ``EliminateCommonSubexpr()``::

    def @main(%x: Tensor[(1, 16), float32]) -> Tensor[(1, 16), float32] {
      %0 = nn.relu(%x);
      %1 = add(%0, 1f);
      add(%1, %1)
    }
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
    children,
    keep_checked_type,
    with_children,
)
from passhost.ir import paused_gc as _gc_paused
from passhost.ir import type_of
from passhost.transform import function_pass

__all__ = ["eliminate_common_subexpr", "EliminateCommonSubexpr"]

#: the tag that keeps tuple keys apart from node keys
_TUPLE = object()
_LEAVES = (Var, Constant, Op, GlobalVar)

_setdefault = dict.setdefault


def _field_key(f: Expr, const_keys: dict, scalars: dict) -> Any:
    """The key of ``f``: the node itself, except that every scalar constant is keyed by
    the first scalar constant of equal dtype and value met (``scalars``)."""
    if type(f) is Constant:
        k = const_keys.get(f)
        if k is None:
            data = f.data
            k = const_keys[f] = scalars.setdefault((data.dtype, data.tobytes()), f) if data.ndim == 0 else f
        return k
    return f


def _arg_key(a: Expr, const_keys: dict, scalars: dict) -> Any:
    """Hashable stand-in for ``a`` under TVM's argument equivalence: equal keys iff
    the arguments are the same node, equal scalar constants, or tuples whose fields
    are pairwise so (one level)."""
    if type(a) is Tuple:
        return (_TUPLE,) + tuple([_field_key(f, const_keys, scalars) for f in a.fields])
    return _field_key(a, const_keys, scalars)


def eliminate_common_subexpr(expr: Expr, fskip: Optional[Callable[[Expr], bool]] = None) -> Expr:
    """Merge common sub-expressions of ``expr`` (usually a ``Function``).

    :param fskip: ``fskip(call_or_getitem) -> bool``; ``True`` keeps that node apart
    :returns: the rewritten expression -- ``expr`` itself when nothing merges
    """
    with _gc_paused():
        return _cse(expr, fskip)


# hot loop: one step per node of every function CSE sees; rules.py holds the same pass as rules, the
# reference
def _cse(expr: Expr, fskip: Optional[Callable[[Expr], bool]]) -> Expr:
    """One explicit-stack post-order walk that rewrites and merges as it goes.

    A node on top of the stack whose children are all rewritten is handled and
    popped; otherwise its pending children are pushed (right to left, so the order
    -- and with it the choice of the call that survives a merge -- is exactly
    :func:`~passhost.ir.post_order`'s).

    Calls are recorded in one table per operator (``tables``) under a key made of
    the rewritten arguments: the argument tuple itself when it holds no tuple and
    no scalar constant other than the first of its value (``scalars``) -- so no key
    is built for the usual call -- else a tuple of :func:`_arg_key` stand-ins;
    calls whose attrs differ from the operator's defaults get their attrs' equality
    class in front. ``fast2`` / ``fast1`` hold the tables of the non-stateful
    operators declaring two / one argument once one of their calls has been seen
    (and only without ``fskip``): their calls take an inlined path. A call pushed
    twice is rewritten again there idempotently (same key, same table entry), so
    that path needs no "done" check; the other paths have one.

    :raises PassError: for an operator call whose argument count is not the
        operator's (possible only through ``Call.with_args``)
    """
    memo: dict = {}  # node -> its replacement (itself when unchanged); no tuples, and no
    # scalar constant equal to an earlier one (const_keys gives its key)
    tmemo: dict = {}  # Tuple -> its replacement
    get = memo.get
    tget = tmemo.get
    tables: dict = {}  # Op -> {key: call}
    fast2: dict = {}  # Op taking two arguments -> its table (the inlined paths; no fskip)
    fast1: dict = {}  # Op taking one argument -> its table
    fast2_get = fast2.get
    fast1_get = fast1.get
    getitems: dict = {}
    const_keys: dict = {}  # Constant -> its key (computed once per constant node)
    scalars: dict = {}  # (dtype, bytes) -> the first scalar constant of that value
    const_get = const_keys.get
    attr_tokens: dict = {}  # (op, id(attrs)) -> (class token or None for the defaults' class, attrs)
    attr_classes: dict = {}  # (op, attrs) -> class number
    defaults: dict = {}  # operator with a table -> its default attrs (``op.attr_defaults``)
    _Call, _Op, _Constant, _Tuple, _TGI, _Let = Call, Op, Constant, Tuple, TupleGetItem, Let
    leaves = _LEAVES
    setdefault = _setdefault

    def resolve(k: Expr) -> Optional[Expr]:
        """The replacement of a child ``memo`` does not know: a leaf (recorded, unless
        a scalar constant), a rewritten tuple, or ``None`` while ``k`` is pending."""
        t = type(k)
        if t is _Tuple:
            return tget(k)
        if t in leaves:
            # a scalar constant is keyed by the first equal one (found by the inlined
            # path in const_keys); that one and every other leaf is its own key
            if t is not _Constant or _field_key(k, const_keys, scalars) is k:
                memo[k] = k
            return k
        return get(k)

    def key_of(args: tuple) -> tuple:
        return tuple([_arg_key(x, const_keys, scalars) for x in args])

    def attr_token(op: Op, attrs: Any) -> Any:
        ent = attr_tokens.get((op, id(attrs)))
        if ent is None:  # hash the attrs once per attrs object, not once per call
            cls = attr_classes.setdefault((op, attrs), len(attr_classes))
            dcls = attr_classes.setdefault((op, op.attr_defaults), len(attr_classes))
            ent = attr_tokens[(op, id(attrs))] = (None if cls == dcls else cls, attrs)
        return ent[0]

    # a typed root is typed throughout (the IR's invariant), and so is everything a
    # rebuilt call can be given as an argument: no per-argument type check needed
    typed = type_of(expr) is not None
    stack = [expr]
    push = stack.append
    pop = stack.pop
    try:
        while stack:
            node = stack[-1]
            t = type(node)
            if t is _Call:
                op = node.op
                tab = fast2_get(op)
                if tab is not None:
                    args = node.args
                    a, b = args  # the arity the operator declares (Call checks it)
                    ka = na = get(a)
                    kb = nb = get(b)
                    if na is None or nb is None:
                        # a pending argument, a scalar constant (memo leaves them out: its
                        # key is its value), or a tuple / leaf met for the first time
                        ready = True
                        special = False
                        if nb is None:
                            if type(b) is _Call:
                                push(b)
                                ready = False
                            elif (kb := const_get(b)) is not None:
                                nb = b
                            else:
                                nb = resolve(b)
                                if nb is None:
                                    push(b)
                                    ready = False
                                elif type(nb) is _Tuple:
                                    special = True
                                else:  # a leaf met for the first time
                                    kb = const_get(nb, nb)
                        if na is None:
                            if type(a) is _Call:
                                push(a)
                                ready = False
                            elif (ka := const_get(a)) is not None:
                                na = a
                            else:
                                na = resolve(a)
                                if na is None:
                                    push(a)
                                    ready = False
                                elif type(na) is _Tuple:
                                    special = True
                                else:  # a leaf met for the first time
                                    ka = const_get(na, na)
                        if not ready:
                            continue
                        pop()
                        key = args if na is a and nb is b else (na, nb)
                        if special:
                            nkey = key_of(key)
                        else:
                            nkey = key if ka is na and kb is nb else (ka, kb)
                    else:
                        pop()
                        nkey = key = args if na is a and nb is b else (na, nb)
                    attrs = node.attrs
                    if attrs is not defaults[op]:
                        tok = attr_token(op, attrs)
                        if tok is not None:
                            nkey = (tok,) + nkey
                    r = setdefault(tab, nkey, node)
                    if r is node and key is not args:  # a new call: rebuild it (typed like node
                        r = node.with_args(key, True, typed)  # when its arguments are, as TVM's rebuild)
                        tab[nkey] = r
                    memo[node] = r
                    continue
                tab = fast1_get(op)
                if tab is not None:
                    args = node.args
                    (a,) = args
                    na = get(a)
                    if na is None:
                        if type(a) is _Call:
                            push(a)
                            continue
                        if (ka := const_get(a)) is not None:
                            na = a
                        else:
                            na = resolve(a)
                            if na is None:
                                push(a)
                                continue
                            ka = _arg_key(na, const_keys, scalars)
                        pop()
                        key = args if na is a else (na,)
                        nkey = (ka,)
                    else:
                        pop()
                        nkey = key = args if na is a else (na,)
                    attrs = node.attrs
                    if attrs is not defaults[op]:
                        tok = attr_token(op, attrs)
                        if tok is not None:
                            nkey = (tok,) + nkey
                    r = setdefault(tab, nkey, node)
                    if r is node and key is not args:
                        r = node.with_args(key, True, typed)
                        tab[nkey] = r
                    memo[node] = r
                    continue
                # any other call: a callee that is not a (non-stateful) operator, fskip,
                # zero or more than two arguments, or an operator met for the first time
                args = node.args
                ready = True
                nargs = [None] * len(args)
                for i in range(len(args) - 1, -1, -1):
                    x = args[i]
                    nx = get(x)
                    if nx is None:
                        nx = resolve(x)
                        if nx is None:
                            push(x)
                            ready = False
                    nargs[i] = nx
                is_op = type(op) is _Op
                if is_op:
                    nop = op
                else:
                    nop = get(op)
                    if nop is None:
                        nop = resolve(op)
                        if nop is None:
                            push(op)
                            ready = False
                if not ready:
                    continue
                pop()
                if node in memo:  # pushed twice and already rewritten
                    continue
                nargs = tuple(nargs)
                if nop is op and all(x is y for x, y in zip(nargs, args)):
                    new = node
                elif nop is op:
                    new = node.with_args(nargs)
                else:
                    new = keep_checked_type(node, Call(nop, nargs, node.attrs if type(nop) is type(op) else None))
                if type(nop) is _Op and nargs and not nop.stateful:
                    tab = tables.get(nop)
                    if tab is None:
                        tab = tables[nop] = {}
                        defaults[nop] = nop.attr_defaults
                        if fskip is None:  # later calls of this operator take an inlined path
                            arity = nop.num_inputs
                            if arity == 2:
                                fast2[nop] = tab
                            elif arity == 1:
                                fast1[nop] = tab
                    if fskip is None or not fskip(new):
                        key = key_of(nargs)
                        attrs = new.attrs
                        if attrs is not defaults[nop]:
                            tok = attr_token(nop, attrs)
                            if tok is not None:
                                key = (tok,) + key
                        new = setdefault(tab, key, new)
                memo[node] = new
                continue
            if t in leaves:  # only the root can be a leaf: children are resolved, not pushed
                pop()
                continue
            if t is _Let:  # the variable is a leaf that stays: only value and body matter
                value = node.value
                body = node.body
                nv = get(value)
                nb = get(body)
                if nv is None or nb is None:
                    ready = True
                    if nb is None:
                        nb = None if type(body) is _Let else resolve(body)
                        if nb is None:
                            push(body)
                            ready = False
                    if nv is None:
                        nv = None if type(value) is _Call else resolve(value)
                        if nv is None:
                            push(value)
                            ready = False
                    if not ready:
                        continue
                pop()
                if node in memo:  # pushed twice and already rewritten
                    continue
                if nv is value and nb is body:
                    memo[node] = node
                else:
                    var = node.var
                    memo[node] = keep_checked_type(node, Let(var, nv, nb), (var, nv, nb))
                continue
            if t is _Tuple:
                fields = node.fields
                ready = True
                nf = [None] * len(fields)
                for i in range(len(fields) - 1, -1, -1):
                    x = fields[i]
                    nx = get(x)
                    if nx is None:
                        nx = resolve(x)
                        if nx is None:
                            push(x)
                            ready = False
                    nf[i] = nx
                if not ready:
                    continue
                pop()
                if node in tmemo:
                    continue
                if all(x is y for x, y in zip(nf, fields)):
                    tmemo[node] = node
                else:
                    tmemo[node] = keep_checked_type(node, Tuple(nf), nf)
                continue
            kids = children(node)  # TupleGetItem, Function, Let, If
            ready = True
            nk = [None] * len(kids)
            for i in range(len(kids) - 1, -1, -1):
                x = kids[i]
                nx = get(x)
                if nx is None:
                    nx = resolve(x)
                    if nx is None:
                        push(x)
                        ready = False
                nk[i] = nx
            if not ready:
                continue
            pop()
            if node in memo:
                continue
            new = with_children(node, tuple(nk))
            if new is not node:
                new = keep_checked_type(node, new)
            if t is _TGI and (fskip is None or not fskip(new)):
                new = getitems.setdefault((new.tuple_value, new.index), new)
            memo[node] = new
    except ValueError:
        # ``a, b = args`` of a call whose argument count is not its operator's
        if type(node) is Call and type(node.op) is Op and len(node.args) != node.op.num_inputs:
            raise PassError(
                f"EliminateCommonSubexpr: a call of {node.op.name} has {len(node.args)} arguments but the "
                f"operator takes {node.op.num_inputs}; rebuild it with Call(op, args) so it is "
                "checked", "EliminateCommonSubexpr") from None
        raise
    r = get(expr)
    if r is None:
        r = tget(expr, expr)
    return r


@function_pass(opt_level=3, name="EliminateCommonSubexpr", required=["InferType"], preserves_types=True)
class EliminateCommonSubexpr:
    """Eliminate common sub-expressions: identical operator calls are computed once.

    Function pass, ``opt_level`` 3, requires ``InferType``. Before / after::

        %0 = nn.relu(%x);      |
        %1 = nn.relu(%x);      |  %0 = nn.relu(%x);
        %2 = add(%0, 1f);      |  %1 = add(%0, 1f);
        %3 = add(%1, 1f);      |  add(%1, %1)
        add(%2, %3)            |

    :param fskip: optional ``fskip(expr) -> bool``; calls (and tuple projections) for
        which it returns ``True`` are neither merged nor used as merge targets
    """

    def __init__(self, fskip: Optional[Callable[[Expr], bool]] = None) -> None:
        if fskip is not None and not callable(fskip):
            raise PassError(
                f"EliminateCommonSubexpr: fskip must be a callable expr -> bool or None, got {fskip!r}",
                "EliminateCommonSubexpr")
        self.fskip = fskip

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return eliminate_common_subexpr(func, self.fskip)
