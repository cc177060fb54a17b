"""Where the printer writes each expression: the scopes of the text format.

The text has nested scopes -- a function literal's body, each branch of an ``if``, a
parenthesised ``let`` -- and an expression used more than once is written once, as a
binding ``%N = ...;``, then referred to as ``%N``. That binding must come before every
use, in a scope that encloses every use. :meth:`Scopes.place` puts each expression in
the innermost scope enclosing all of its uses (their lowest common ancestor in the scope
tree), so a value computed outside a closure and used both inside and outside it is
bound outside, before the closure::

    %0 = negative(%x);                     # not inside the fn, where it is used first
    %1 = exp(%0);
    %2 = fn (%y) { add(%y, %0) };
    %2(%1)

In a valid program that scope is inside the scopes of the variables the expression reads.
A module can still share an expression that reads a function's parameter between the
function's body and the outside (nothing forbids it in a graph); such an expression, and
every expression over it, stays in the parameter's scope, where it was printed before
this analysis existed, and the reference from outside is read back through the module's
``%N`` table.

One walk over the nodes, users before what they use; the common ancestor of two scopes
climbs the tree from the deeper one (in practice a step or two: most values are used in
one scope); the check of the variables is one pass over the variable reads.
"""
from __future__ import annotations

from .expr import USES_OF, Call, Constant, Expr, Function, GlobalVar, If, Let, Op, Var

__all__ = ["Scopes"]

_ATOMIC = frozenset([Var, Constant, Op, GlobalVar])


class Scopes:
    """The scope tree of one print call and each expression's place in it.

    ``home[node]`` is the scope whose text holds ``node``'s (bound or inline); ``inner``
    maps a function to its body's scope, an ``if`` to its branches' ``(then, else)``
    and a parenthesised ``let`` to its own scope (a ``let`` that is the single-use result
    of a scope continues that scope and has none). Scope ``k`` has ``parent[k]`` and
    ``depth[k]``.
    """

    __slots__ = ("home", "inner", "parent", "depth")

    def __init__(self) -> None:
        self.home: dict = {}
        self.inner: dict = {}
        self.parent: list = []
        self.depth: list = []

    def new(self, parent: int) -> int:
        """A new scope inside ``parent`` (-1: a root)."""
        k = len(self.parent)
        self.parent.append(parent)
        self.depth.append(0 if parent < 0 else self.depth[parent] + 1)
        return k

    def common(self, a: int, b: int) -> int:
        """The innermost scope enclosing scopes ``a`` and ``b``."""
        parent, depth = self.parent, self.depth
        while depth[a] > depth[b]:
            a = parent[a]
        while depth[b] > depth[a]:
            b = parent[b]
        while a != b:
            a, b = parent[a], parent[b]
        return a

    def place(self, root: Expr, uses: dict, done: dict) -> int:
        """Place ``root`` (a scope's result) and everything under it in a new root scope;
        nodes in ``done`` (printed already) and leaves are left out. Returns the scope."""
        scope = self.new(-1)
        if type(root) in _ATOMIC or root in done:
            return scope
        self.home[root] = scope
        order = _post_order(root, done)
        binders: dict = {}  # bound variable -> the scope it is bound in
        reads: list = []    # (node, variable it reads, the scope where it reads it)
        self._down(order, uses, done, binders, reads)
        bad = _Tree(self, scope).outside(binders, reads)
        if bad:
            self._keep_in_scope(order, binders, bad)
        return scope

    def _down(self, order: list, uses: dict, done: dict, binders: dict, reads: list) -> None:
        """Each node's home: the innermost scope enclosing all its uses (users first).
        ``reads`` gets the variable reads whose variable is not known to be bound in the
        scope of the read (to check once the tree is complete)."""
        home, inner, new, common = self.home, self.inner, self.new, self.common
        get, bound = home.get, binders.get
        chained = {order[-1]} if type(order[-1]) is Let and uses.get(order[-1], 0) <= 1 else set()
        atomic, _Call, _Var = _ATOMIC, Call, Var
        for node in reversed(order):
            s = home[node]
            t = type(node)
            if t is _Call:  # (the common case, unrolled)
                for k in node.args + (node.op,):
                    tk = type(k)
                    if tk is _Var:
                        if bound(k) != s:
                            reads.append((node, k, s))
                    elif tk not in atomic and k not in done:
                        h = get(k)
                        home[k] = s if h is None or h == s else common(h, s)
                continue
            if t is Function:
                body = inner[node] = new(s)
                edges: tuple = ((node.body, body, True),)
                for p in node.params:
                    binders[p] = body
            elif t is If:
                then, other = inner[node] = (new(s), new(s))
                cond, yes, no = USES_OF[If](node)
                edges = ((cond, s, False), (yes, then, True), (no, other, True))
            elif t is Let:
                if node not in chained:
                    s = inner[node] = new(s)
                binders[node.var] = s
                edges = ((node.value, s, False), (node.body, s, True))
            else:
                edges = tuple((k, s, False) for k in USES_OF[t](node))
            for k, ks, tail in edges:
                tk = type(k)
                if tk is _Var:
                    if bound(k) != ks:
                        reads.append((node, k, ks))
                elif tk not in atomic and k not in done:
                    h = get(k)
                    home[k] = ks if h is None or h == ks else common(h, ks)
                    if tail and tk is Let and uses.get(k, 0) <= 1:
                        chained.add(k)

    def _keep_in_scope(self, order: list, binders: dict, bad: dict) -> None:
        """Move each node that reads a variable outside that variable's scope (``bad``:
        node -> the scope), and every node over it, back into the scope."""
        home, inner = self.home, self.inner
        need: dict = {}
        for node in order:
            want = bad.get(node)
            for k in USES_OF[type(node)](node):
                r = need.get(k)
                if r is not None and not _binds(inner.get(node), r, self) and (
                        want is None or self.depth[r] > self.depth[want]):
                    want = r
            if want is not None and self.common(want, home[node]) != want:
                home[node] = need[node] = want


def _binds(own, scope: int, scopes: Scopes) -> bool:
    """Whether ``scope`` is (inside) one of a node's own scopes ``own``."""
    if own is None:
        return False
    for o in own if type(own) is tuple else (own,):
        if scopes.depth[scope] >= scopes.depth[o] and scopes.common(o, scope) == o:
            return True
    return False


class _Tree:
    """Entry and exit numbers of the scopes under one root: ``a`` encloses ``b`` in O(1)."""

    __slots__ = ("tin", "tout")

    def __init__(self, scopes: Scopes, root: int) -> None:
        kids: dict = {}
        for k in range(root + 1, len(scopes.parent)):
            kids.setdefault(scopes.parent[k], []).append(k)
        self.tin: dict = {}
        self.tout: dict = {}
        clock = 0
        stack = [(root, False)]
        while stack:
            k, done = stack.pop()
            clock += 1
            if done:
                self.tout[k] = clock
                continue
            self.tin[k] = clock
            stack.append((k, True))
            stack.extend((c, False) for c in kids.get(k, ()))

    def outside(self, binders: dict, reads: list) -> dict:
        """``{node: scope}`` for each node whose home is outside the scope of a variable
        it reads (only in a module that shares such a node; empty otherwise)."""
        tin, tout = self.tin, self.tout
        bad: dict = {}
        for node, var, h in reads:
            b = binders.get(var)
            if b is None:
                continue  # a parameter of the function printed, or a free variable
            if not (tin[b] <= tin[h] and tout[h] <= tout[b]):
                was = bad.get(node)
                if was is None or tin[b] > tin[was]:  # (the variables' scopes nest: keep the inner one)
                    bad[node] = b
        return bad


def _post_order(root: Expr, done: dict) -> list:
    """The non-leaf nodes under ``root`` not in ``done``, each after everything it uses."""
    order: list = []
    seen: set = set()
    stack: list = [root]
    push, pop = stack.append, stack.pop
    atomic = _ATOMIC
    fin = _FIN
    while stack:
        node = pop()
        if node is fin:
            order.append(pop())
            continue
        if node in seen:
            continue
        seen.add(node)
        push(node)
        push(fin)
        for k in node.args + (node.op,) if type(node) is Call else USES_OF[type(node)](node):
            if type(k) not in atomic and k not in seen and k not in done:
                push(k)
    return order


_FIN = object()  # marks, on the walk's stack, a node whose inputs are all listed
