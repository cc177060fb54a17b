"""DeadCodeElimination: remove let-bindings nobody uses (and, if asked, inline single uses).

The algorithm of TVM's ``relay.transform.DeadCodeElimination`` (``dead_code.cc``). Only
``let`` bindings are touched: in graph form an unused node cannot exist.

1. **Purity.** A binding may go only if evaluating its value has no side effect.
   Constants, variables, operators, globals and functions (as values) are pure to
   evaluate; a call is pure when its callee and arguments are and *calling* the callee
   is: an operator unless it is stateful, a global or local function whose body is pure
   (recursion is assumed pure while it is analysed), never a function parameter, a
   function taken out of a tuple, or an ``Extern`` global. ``ignore_impurity=True``
   treats everything as pure.
2. **Uses.** The function is walked from its body; the value of a pure binding is walked
   only when the first use of its variable is found, so uses inside dead values do not
   count and a whole dead chain disappears in one run. A use inside a nested function
   counts twice (the function may run many times). Shared sub-expressions are walked at
   most twice (only 0 / 1 / many matters).
3. **Rewrite.** Impure bindings stay; unused pure ones go; with ``inline_once`` a pure
   binding used exactly once is replaced by its value at the use.

Everything is walked with explicit stacks and each node is handled a bounded number of
times, so the pass is linear (TVM's re-visiting is quadratic on long let chains) and a
100,000-deep let chain works at the default recursion limit. When no binding goes the
function object is returned unchanged.

Before::

    def @main(%x: Tensor[(3), float32]) {
      let %a = add(%x, 1f);
      let %b = multiply(%a, 2f);
      let %c = negative(%x);
      %c
    }

After ``DeadCodeElimination()``::

    def @main(%x: Tensor[(3), float32]) {
      let %c = negative(%x);
      %c
    }
"""
from __future__ import annotations

from typing import Any

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    IRModule,
    Let,
    Op,
    Tuple,
    TupleGetItem,
    Var,
    children,
    rewrite_post_order,
)
from passhost.ir import paused_gc as _gc_paused
from passhost.transform import module_pass

__all__ = ["Purity", "count_uses", "has_let", "eliminate_dead_code", "dead_code_elimination",
           "DeadCodeElimination"]

_LEAVES = (Var, Constant, Op, GlobalVar)
_LET = frozenset({Let})
#: nodes that hold no variable use
_INERT = frozenset({Constant, Op, GlobalVar})
#: nodes whose evaluation is trivially pure
_SIMPLE = frozenset({Var, Constant, Op, GlobalVar, Function})


class Purity:
    """Whether evaluating an expression may have a side effect (memoised, iterative).

    :param mod: the module whose global functions calls may reach (or ``None``)
    :param ignore_impurity: treat every expression as pure
    """

    def __init__(self, mod: Any = None, ignore_impurity: bool = False) -> None:
        self.mod = mod
        self.ignore_impurity = ignore_impurity
        self.memo: dict = {}
        #: ``{let-bound var: its value}``, filled as lets are met
        self.let_value: dict = {}
        self._globals = {gv.name_hint: f for gv, f in mod.items()} if mod is not None else {}

    def register_let(self, let: Let) -> None:
        self.let_value[let.var] = let.value

    def _callee_body(self, callee: Expr) -> Any:
        """What decides whether *calling* ``callee`` is pure: ``True``/``False``, or a
        function body whose purity decides it."""
        seen = 0
        while True:
            t = type(callee)
            if t is Op:
                return not callee.stateful
            if t is Function:
                return callee.body
            if t is GlobalVar:
                f = self._globals.get(callee.name_hint)
                if type(f) is not Function or f.attrs.get("Extern", 0):
                    return False
                return f.body
            if t is Var and seen < 64:
                value = self.let_value.get(callee)
                if value is None:
                    return False  # a parameter: a higher-order call, assumed impure
                callee = value
                seen += 1
                continue
            return False

    def is_pure(self, root: Expr) -> bool:
        """Whether evaluating ``root`` is free of side effects."""
        if self.ignore_impurity:
            return True
        memo = self.memo
        t = type(root)
        if t in _SIMPLE:
            return True
        r = memo.get(root)
        if r is not None:
            return r
        if t is Call and type(root.op) is Op:
            # fast path: an operator applied to leaves (the usual let value)
            for a in root.args:
                if type(a) not in _SIMPLE:
                    break
            else:
                return not root.op.stateful
        entered: set = set()
        stack: list = [root]
        while stack:
            node = stack[-1]
            if node in memo:
                stack.pop()
                continue
            t = type(node)
            if t in _LEAVES or t is Function:
                memo[node] = True
                stack.pop()
                continue
            if t is Call:
                body = self._callee_body(node.op)
                deps = (node.op,) + node.args
                if type(body) is not bool:
                    deps += (body,)
            elif t is Let:
                self.register_let(node)
                deps = (node.value, node.body)
            elif t is Tuple:
                deps = node.fields
            elif t is TupleGetItem:
                deps = (node.tuple_value,)
            elif t is If:
                deps = (node.cond, node.true_branch, node.false_branch)
            else:  # pragma: no cover - every node kind is handled above
                raise PassError(f"DeadCodeElimination: unknown node kind {t.__name__}", "DeadCodeElimination")
            if node not in entered:
                entered.add(node)
                for d in deps:
                    if d not in memo and d not in entered:
                        stack.append(d)
                continue
            stack.pop()
            # a dependency still in progress is a recursive call: assumed pure
            ok = all(memo.get(d, True) for d in deps)
            if t is Call and type(body) is bool:
                ok = ok and body
            memo[node] = ok
        return memo[root]


def count_uses(func: Function, purity: Purity) -> dict:
    """``{let-bound var: 0, 1 or 2 (= more than one)}`` for the lets of ``func``.

    A run of nested lets (a *spine*) is registered top-down, its body walked, and only
    then are the bound values walked bottom-up -- a pure value only if its variable has
    been used by then (every use of a let variable lies in the let's body, so this is
    TVM's "walk the value at the first use" without remembering deferred values). Uses
    inside dead values therefore do not count; a use inside a nested function counts
    twice; a shared sub-expression is walked at most twice.
    """
    counts: dict = {}
    depth_of: dict = {}
    visits: dict = {}
    let_value = purity.let_value
    is_pure = purity.is_pure
    _Var, _Let, _Function, _Call, _Tuple, _TGI, _If, _Op = (
        Var, Let, Function, Call, Tuple, TupleGetItem, If, Op)
    inert = _INERT
    stack: list = [(func.body, 0)]
    push = stack.append
    pop = stack.pop
    while stack:
        node, d = pop()
        if d < 0:  # a spine marker: walk the values of its lets, last first
            spine, i = node
            d = -1 - d
            while i >= 0:
                let = spine[i]
                i -= 1
                value = let.value
                if counts[let.var] == 0 and is_pure(value):
                    continue  # dead so far: its value is never walked
                tv = type(value)
                if tv is _Call and type(value.op) is _Op:
                    args = value.args
                    for a in args:
                        ta = type(a)
                        if ta is not _Var and ta not in inert:
                            break
                    else:  # only variables and constants: count here, in line
                        n = visits.get(value, 0)
                        if n >= 2:
                            continue
                        visits[value] = n + 1
                        for a in args:
                            if type(a) is _Var:
                                bd = depth_of.get(a)
                                if bd is not None:
                                    c = counts[a]
                                    if c < 2:
                                        counts[a] = c + (2 if d > bd else 1)
                        continue
                elif tv is _Var:
                    bd = depth_of.get(value)
                    if bd is not None:
                        c = counts[value]
                        if c < 2:
                            counts[value] = c + (2 if d > bd else 1)
                    continue
                elif tv in inert:
                    continue
                # a larger value: walk it before the earlier lets of the spine
                push(((spine, i), -1 - d))
                push((value, d))
                break
            continue
        while True:  # follows bodies without going through the stack
            t = type(node)
            if t is _Var:
                bd = depth_of.get(node)
                if bd is not None:
                    c = counts[node]
                    if c < 2:
                        counts[node] = c + (2 if d > bd else 1)
                break
            if t in inert:
                break
            n = visits.get(node, 0)
            if n >= 2:
                break
            visits[node] = n + 1
            if t is _Let:
                spine = []
                while True:
                    var = node.var
                    let_value[var] = node.value
                    depth_of[var] = d
                    if var not in counts:
                        counts[var] = 0
                    spine.append(node)
                    node = node.body
                    if type(node) is not _Let:
                        break
                    n = visits.get(node, 0)
                    if n >= 2:
                        node = None
                        break
                    visits[node] = n + 1
                push(((spine, len(spine) - 1), -1 - d))
                if node is None:
                    break
                continue
            if t is _Call:
                op = node.op
                if type(op) is not _Op:
                    push((op, d))
                for a in node.args:
                    ta = type(a)
                    if ta is _Var:  # a use, counted here rather than via the stack
                        bd = depth_of.get(a)
                        if bd is not None:
                            c = counts[a]
                            if c < 2:
                                counts[a] = c + (2 if d > bd else 1)
                    elif ta not in inert:
                        push((a, d))
                break
            if t is _Function:
                node = node.body
                d += 1
                continue
            if t is _TGI:
                node = node.tuple_value
                continue
            if t is _Tuple:
                for f in node.fields:
                    push((f, d))
            elif t is _If:
                push((node.cond, d))
                push((node.true_branch, d))
                push((node.false_branch, d))
            break
    return counts


def has_let(root: Expr) -> bool:
    """Whether any node reachable from ``root`` (nested functions, callees and ``If``
    branches included) is a ``Let``.

    One unordered walk with an explicit stack that stops at the first ``Let``: each
    node is pushed once (marked as it is pushed). Without a ``Let`` there is no
    binding to remove, so :func:`eliminate_dead_code` needs neither use counts nor
    purity and returns the function itself.
    """
    seen: set = set()  # every node ever pushed (marked when pushed: pushed once)
    add = seen.add
    stack = [root]
    pop = stack.pop
    push = stack.append
    _Call, _Op, _Let = Call, Op, Let
    leaves = _LEAVES
    while stack:
        node = pop()
        t = type(node)
        if t is _Call:
            op = node.op
            if type(op) is not _Op and op not in seen:
                add(op)
                push(op)
            args = node.args
            if len(args) == 2:  # the usual call, unrolled
                a, b = args
                if a not in seen:
                    add(a)
                    push(a)
                if b not in seen:
                    add(b)
                    push(b)
            else:
                for a in args:
                    if a not in seen:
                        add(a)
                        push(a)
        elif t in leaves:
            continue
        elif t is _Let:
            return True
        else:
            for a in children(node):
                if a not in seen:
                    add(a)
                    push(a)
    return False


def eliminate_dead_code(func: Function, purity: Purity = None, inline_once: bool = False) -> Function:
    """Remove the unused pure let-bindings of ``func`` (inline single uses if asked).

    A function without any ``let`` (every graph-form function) is returned as it is
    after one cheap walk (:func:`has_let`): only let bindings can be dead.

    :param purity: the purity oracle (default: a fresh one without module context)
    :returns: the new function -- ``func`` itself when no binding goes
    """
    if purity is None:
        purity = Purity()
    with _gc_paused():
        if not has_let(func.body):
            return func
        counts = count_uses(func, purity)
        drop = set()
        inline: dict = {}
        for var, c in counts.items():
            if c == 0 or (c == 1 and inline_once):
                value = purity.let_value.get(var)
                if value is not None and purity.is_pure(value):
                    if c == 0:
                        drop.add(var)
                    else:
                        inline.setdefault(value, []).append(var)
                        drop.add(var)
        if not drop:
            return func
        return _rewrite(func, drop, inline, counts)


def _rewrite(func: Function, drop: set, inline: dict, counts: dict) -> Function:
    """The rewrite, over the host's driver: an inlined binding's variable is bound to its
    (rewritten) value, where its let disappears, and a dropped let -- or one only dead
    code reaches, which the use count never met -- becomes its body."""
    inlined = {var for vs in inline.values() for var in vs}

    def bind(var: Var, value: Expr):
        return value if var in inlined else None

    def drop_let(let: Let):
        var = let.var
        return let.body if var in drop or var not in counts else None

    return rewrite_post_order(func, drop_let, keep_types=True, only=_LET, bind=bind if inlined else None)


def dead_code_elimination(mod: IRModule, inline_once: bool = False, ignore_impurity: bool = False) -> IRModule:
    """Run dead-code elimination over every function of ``mod``; returns a new module."""
    purity = Purity(mod, ignore_impurity)
    out = mod.copy()
    for gv, func in mod.items():
        if type(func) is Function:
            new = eliminate_dead_code(func, purity, inline_once)
            if new is not func:
                out[gv] = new
    return out


@module_pass(opt_level=1, name="DeadCodeElimination", required=["InferType"], preserves_types=True)
class DeadCodeElimination:
    """Remove unused let-bindings whose values are pure.

    Module pass, ``opt_level`` 1, requires ``InferType``. Before / after::

        let %a = add(%x, 1f);        |
        let %b = multiply(%a, 2f);   |
        let %c = negative(%x);       |  let %c = negative(%x);
        %c                           |  %c

    :param inline_once: also inline pure bindings used exactly once
    :param ignore_impurity: treat every value as pure (remove unused impure bindings too)
    """

    def __init__(self, inline_once: bool = False, ignore_impurity: bool = False) -> None:
        for name, value in (("inline_once", inline_once), ("ignore_impurity", ignore_impurity)):
            if not isinstance(value, bool):
                raise PassError(f"DeadCodeElimination: {name} must be True or False, got {value!r}",
                                "DeadCodeElimination")
        self.inline_once = inline_once
        self.ignore_impurity = ignore_impurity

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return dead_code_elimination(mod, self.inline_once, self.ignore_impurity)
