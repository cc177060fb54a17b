"""The use analysis: who uses each node of a graph, computed once per function.

Passes that ask "is this value used once?" (to fuse it, bind it, inline it or print it
inline) ask here, and nowhere else:

* :func:`dataflow` -- the whole dataflow graph: every node but the operators in post
  order (``nodes``, positions in ``index``), and for each the positions of the nodes that
  use it (``users``, one entry per use, so ``add(%x, %x)`` uses ``%x`` twice). FuseOps
  partitions it.
* :func:`use_counts` -- only the counts, for the nodes that are not leaves (what the
  printer, ``pattern.partition`` and FoldScaleAxis ask): the cheaper walk.
* :func:`binding_uses` -- how often each ``let``-bound variable is used on the paths that
  are live, as TVM's DeadCodeElimination counts (:mod:`.binding_uses`).

A *use* is an edge from a node to a sub-expression it evaluates: a call's arguments and
its callee (unless an operator), a tuple's fields, a projection's tuple, a let's value and
body, an if's three parts, a function's body. The variables a let or a function binds are
listed as nodes but a binding is not a use::

    %0 = exp(%x); add(%0, %0)     # uses: %x once (by exp), %0 twice (by add)

Answers are remembered per root (function) while a pass call -- or a whole pipeline --
runs, and dropped when it returns: a node never changes, so neither does its dataflow, and
a pass that returns a function unchanged hands the next one its analysis for free. At most
four are kept (the oldest goes first). Outside a pass every question is answered afresh.
(The host knows a pass is running because it pauses the cyclic collector for it; a process
that keeps the collector off itself keeps the last four answers.) Everything is an
explicit-stack walk, linear in the graph.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .._gc import at_region_end, gc_paused, in_region
from ..expr import CHILDREN_OF as _CHILDREN_OF
from ..expr import USES_OF as _USES_OF
from ..expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Op, TupleGetItem, Var

__all__ = ["Dataflow", "UseCounts", "dataflow", "use_counts", "count_uses_into", "LEAVES"]

#: nodes that use nothing (what :func:`use_counts` does not count)
LEAVES = frozenset({Var, Constant, Op, GlobalVar})
_SCOPING = frozenset({Function, If, Let})

#: the answers of this region: key -> analysis; at most _KEEP of them (the oldest goes)
_MEMO: dict = {}
_KEEP = 4


@at_region_end
def _forget() -> None:
    _MEMO.clear()


def _remember(key: Any, value: Any) -> Any:
    if in_region():
        if len(_MEMO) >= _KEEP:
            del _MEMO[next(iter(_MEMO))]
        _MEMO[key] = value
    return value


class Dataflow:
    """The dataflow graph of one root (see the module docs); build it with :func:`dataflow`.

    :ivar root: the expression analysed
    :ivar nodes: every node reachable from ``root`` except operators, children before
        parents (``ir.post_order``'s order without the operators)
    :ivar index: ``{node: its position in nodes}``
    :ivar users: ``users[i]``: the positions of the nodes using ``nodes[i]``, one per use,
        in ascending order
    :ivar functions: ``{function: position of the first node the walk reached through it}``
        for every function entered (not skipped): the nodes at positions from there up to
        the function's own are the ones first reached through it (a depth-first walk's
        descendants are contiguous in post order)
    """

    __slots__ = ("root", "nodes", "index", "users", "functions", "_owners")

    def __init__(self, root: Expr, nodes: list, index: dict, users: list, functions: dict) -> None:
        self.root, self.nodes, self.index, self.users, self.functions = root, nodes, index, users, functions
        self._owners: Optional[list] = None

    def __len__(self) -> int:
        return len(self.nodes)

    def uses(self, node: Expr) -> int:
        """How often ``node`` is used (0 for the root, an operator or a stranger)."""
        i = self.index.get(node)
        return 0 if i is None else len(self.users[i])

    def users_of(self, node: Expr) -> list:
        """The nodes using ``node``, one per use."""
        nodes = self.nodes
        i = self.index.get(node)
        return [] if i is None else [nodes[j] for j in self.users[i]]

    def owners(self) -> list:
        """``owners()[i]``: the position of the innermost function, other than the root, the
        walk reached ``nodes[i]`` through (the *scope* that owns it), or -1 for nodes
        reached from the root's own body and for the root. A node used from two scopes is
        owned by the first that reaches it, in evaluation order."""
        if self._owners is None:
            self._owners = _owners(self)
        return self._owners


def _owners(df: Dataflow) -> list:
    n = len(df.nodes)
    index = df.index
    blocks = sorted((start, -index[f]) for f, start in df.functions.items()
                    if f is not df.root and start < index[f])
    owners = [-1] * n
    if not blocks:
        return owners
    open_: list = []  # (end, function position) of the blocks containing i, innermost last
    k = 0
    for i in range(n):
        while open_ and open_[-1][0] <= i:
            open_.pop()
        while k < len(blocks) and blocks[k][0] == i:
            end = -blocks[k][1]
            open_.append((end, end))
            k += 1
        if open_:
            owners[i] = open_[-1][1]
    return owners


def dataflow(root: Expr, skip: Optional[Callable[[Expr], bool]] = None) -> Dataflow:
    """The :class:`Dataflow` of ``root`` (remembered per root and ``skip`` while a pass
    runs).

    :param skip: functions (other than ``root``) for which this is true are listed, their
        insides not entered: FuseOps does not look into ``Primitive`` functions
    """
    key = (Dataflow, root, skip)
    found = _MEMO.get(key)
    if found is None:
        found = _remember(key, _build(root, skip))
    return found


_FIN = object()  # stack marker: the entry below is a node whose children are all listed


# hot loop: one step per node of the graph, the analysis every use-asking pass pays for
# (FuseOps on a million nodes); a helper call per node or per use would cost more than the
# work, so calls and lets, the common nodes, are unrolled
@gc_paused
def _build(root: Expr, skip: Optional[Callable[[Expr], bool]]) -> Dataflow:
    nodes: list = []
    index: dict = {}
    users: list = []
    functions: dict = {}
    add_node, add_users = nodes.append, users.append
    seen: set = set()
    mark = seen.add
    stack = [root]
    push, pop, push_all = stack.append, stack.pop, stack.extend
    FIN = _FIN
    _Call, _Var, _Constant, _Op, _Let, _TGI, _Function = Call, Var, Constant, Op, Let, TupleGetItem, Function
    children_of, uses_of = _CHILDREN_OF, _USES_OF
    while stack:
        node = pop()
        if node is FIN:  # every child of the node below is listed: list it, record its uses
            node = pop()
            i = len(nodes)
            index[node] = i
            add_node(node)
            add_users([])
            t = type(node)
            try:
                if t is _Call:
                    op = node.op
                    if type(op) is not _Op:
                        users[index[op]].append(i)
                    for a in node.args:
                        users[index[a]].append(i)
                elif t is _Let:
                    users[index[node.value]].append(i)
                    users[index[node.body]].append(i)
                elif t is _TGI:
                    users[index[node.tuple_value]].append(i)
                else:
                    for k in uses_of[t](node):
                        users[index[k]].append(i)
            except KeyError:  # an operator used as a value (not a callee): not a node
                _rest_of_uses(node, i, index, users)
            continue
        if node in seen:
            continue
        mark(node)
        t = type(node)
        if t is _Op:
            continue
        if t is _Var or t is _Constant or (t is _Function and skip is not None and node is not root and skip(node)):
            index[node] = len(nodes)
            add_node(node)
            add_users([])
            continue
        push(node)
        push(FIN)
        if t is _Call:
            args = node.args
            if len(args) == 2:
                a, b = args
                if b not in seen:
                    push(b)
                if a not in seen:
                    push(a)
            else:
                for k in range(len(args) - 1, -1, -1):
                    a = args[k]
                    if a not in seen:
                        push(a)
            op = node.op
            if type(op) is not _Op and op not in seen:
                push(op)
        elif t is _Let:
            push(node.body)
            push(node.value)
            push(node.var)
        elif t is _TGI:
            push(node.tuple_value)
        else:
            if t is _Function:
                functions[node] = len(nodes)
            push_all(children_of[t](node)[::-1])
    return Dataflow(root, nodes, index, users, functions)


def _rest_of_uses(node: Expr, i: int, index: dict, users: list) -> None:
    """The uses of ``node`` from its first operator child on (the ones before it are
    recorded): those of the children that are nodes."""
    if type(node) is Call:
        kids = ((node.op,) if type(node.op) is not Op else ()) + node.args
    elif type(node) is Let:
        kids = (node.value, node.body)
    else:
        kids = _USES_OF[type(node)](node)
    first = next(k for k, kid in enumerate(kids) if kid not in index)
    for kid in kids[first + 1:]:
        j = index.get(kid)
        if j is not None:
            users[j].append(i)


class UseCounts(dict):
    """``{node: how often it is used}`` for every node under a root that is used and is not
    a leaf (a variable, constant, operator or global); see :func:`use_counts`.

    :ivar scoped: whether a function, ``let`` or ``if`` lies below the root (one that
        opens a scope: where a printer must place bindings)
    """

    __slots__ = ("scoped",)


def use_counts(root: Expr) -> UseCounts:
    """How often each node under ``root`` that is not a leaf is used (remembered per root
    while a pass runs; read from the root's :func:`dataflow` when that is known)::

        %0 = exp(%x); add(%0, %0)     ->  {%0: 2}    (add, the root, is used by nothing)
    """
    key = (UseCounts, root)
    found = _MEMO.get(key)
    if found is None:
        df = _MEMO.get((Dataflow, root, None))
        found = _remember(key, _counts_of(df) if df is not None else _count(root))
    return found


def _counts_of(df: Dataflow) -> UseCounts:
    out = UseCounts((n, len(u)) for n, u in zip(df.nodes, df.users) if u and type(n) not in LEAVES)
    out.scoped = any(type(n) in _SCOPING for n in df.nodes if n is not df.root)
    return out


def _count(root: Expr) -> UseCounts:
    uses = UseCounts()
    uses.scoped = count_uses_into(uses, root)
    return uses


# hot loop: one step per node and per use; the printer runs it on every graph it prints
@gc_paused
def count_uses_into(uses: dict, root: Expr) -> bool:
    """Add the uses under ``root`` to ``uses`` (``{node: count}``, non-leaf nodes): the
    counting behind :func:`use_counts`, for a caller that counts several roots into one
    table (the printer: the functions of a module). A node already in ``uses`` is not
    entered again (only its count grows), so a node shared with an earlier root is walked
    once. Returns whether a scope (a function, ``if`` or ``let`` other than ``root``) was
    met::

        count_uses_into(uses := {}, fn (%x) { %0 = exp(%x); add(%0, %0) })  ->  False
        uses  ->  {add(%0, %0): 1, exp(%x): 2}     (the root is counted by its user)
    """
    if root in uses or type(root) in LEAVES:
        return False
    get = uses.get
    leaves, scoping = LEAVES, _SCOPING
    _Call = Call
    uses_of = _USES_OF
    stack = [root]
    push, pop = stack.append, stack.pop
    scoped = False
    while stack:
        node = pop()
        t = type(node)
        if t is _Call:
            kids = node.args
            op = node.op
            if type(op) not in leaves:
                kids = kids + (op,)
        else:
            kids = uses_of[t](node)
            if t in scoping and node is not root:
                scoped = True
        for k in kids:
            if type(k) in leaves:
                continue
            c = get(k)
            if c is None:
                uses[k] = 1
                push(k)
            else:
                uses[k] = c + 1
    return scoped
