"""The analyses FuseOps partitions: an indexed dataflow graph and its post-dominator tree.

Both follow TVM's ``IndexedForwardGraph`` and ``DominatorTree`` (``fuse_ops.cc`` and
``analysis/graph_partitioner.cc``), built without recursion so a 100,000-deep chain
works at Python's default recursion limit.

**Dataflow graph.** Every expression reachable from the root, except operators, is a
node, numbered in post-DFS order (children before parents, left to right -- the order
of :func:`passhost.ir.post_order`). A node records its *pattern* (an
:class:`~passhost.ir.OpPattern` value), whether it is *extern* (used from outside the
fusible dataflow: function parameters and bodies, operands of ``let``/``if``, non-tensor
tuple fields ...) and its *outputs*: ``(consumer, edge pattern)`` pairs.

Nested functions are fusion barriers. A function marked ``Primitive`` (or carrying a
``Compiler`` attribute) is a leaf: nothing inside it is looked at. Any other nested
function opens a new *scope*; an expression is owned by the first scope that reaches it,
and an expression used from a second scope is marked extern instead of getting an edge
there, so no group ever spans two scopes.

**Post-dominator tree.** Built in reverse post-DFS order: an extern node (or one without
outputs) is a root; any other node's parent is the least common ancestor of its
consumers, and its ``pattern`` is the maximum of its edge patterns and of the tree
patterns of the nodes climbed to reach that ancestor (how the node's value reaches its
immediate post-dominator). TVM climbs one parent at a time, which is quadratic when
many nodes have consumers far apart (long skip connections); here each tree node also
carries a skew-binary *jump pointer* (with the maximum pattern along the jump), so every
ancestor walk takes ``O(log depth)`` steps while accumulating exactly the same pattern.
"""
from __future__ import annotations

import numpy as np

from passhost.errors import PassError
from passhost.ir import (
    Call,
    Constant,
    Expr,
    Function,
    If,
    Let,
    Op,
    OpPattern,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
)

__all__ = ["DataflowGraph", "PostDominatorTree", "build_graph", "post_dominator_tree", "is_barrier_function"]

ELEMWISE = int(OpPattern.ELEMWISE)
BROADCAST = int(OpPattern.BROADCAST)
INJECTIVE = int(OpPattern.INJECTIVE)
TUPLE = int(OpPattern.TUPLE)
OPAQUE = int(OpPattern.OPAQUE)

#: dtypes of scalar constants FuseOps may fuse into their consumer (TVM's "simple" constants)
SIMPLE_CONST_DTYPES = frozenset({"int32", "int64", "float32", "float64", "bool"})


def _nonzero(value: object) -> bool:
    # TVM's HasNonzeroAttr: an integer attribute other than 0
    return isinstance(value, (int, np.integer)) and value != 0


def is_barrier_function(fn: Function) -> bool:
    """Whether FuseOps leaves ``fn`` alone entirely: a non-zero ``Primitive`` attribute
    (already fused) or a ``Compiler`` attribute (external codegen)."""
    attrs = fn.attrs
    return ("Primitive" in attrs and _nonzero(attrs["Primitive"])) or "Compiler" in attrs


class DataflowGraph:
    """The indexed forward dataflow graph of one function.

    :ivar nodes: expressions in post-DFS order (operators excluded)
    :ivar index: ``{expr: position in nodes}``
    :ivar pattern: node pattern kinds (ints, :class:`~passhost.ir.OpPattern` values)
    :ivar extern: ``extern[i]`` is true when node ``i`` is used outside the dataflow
    :ivar outputs: ``outputs[i]`` lists ``(consumer index, edge pattern)`` pairs
    :ivar opaque_functions: nested functions that were not entered (primitive/external)
    """

    __slots__ = ("nodes", "index", "pattern", "extern", "outputs", "opaque_functions")

    def __init__(self) -> None:
        self.nodes: list = []
        self.index: dict = {}
        self.pattern: list = []
        self.extern: list = []
        self.outputs: list = []
        self.opaque_functions: set = set()

    def __len__(self) -> int:
        return len(self.nodes)

    def dump(self) -> str:
        """A debugging listing: ``index: kind pattern [extern] -> consumers``."""
        lines = []
        for i, node in enumerate(self.nodes):
            outs = ", ".join(f"{c}:{p}" for c, p in self.outputs[i])
            flag = " extern" if self.extern[i] else ""
            lines.append(f"{i}: {type(node).__name__} pattern={self.pattern[i]}{flag} -> [{outs}]")
        return "\n".join(lines)


_FIN = object()    # stack marker: the next entry below is a node whose children are done
_SCOPE = object()  # stack marker: the next entry below is the scope number to switch to


def build_graph(root: Expr) -> DataflowGraph:
    """Build the dataflow graph of ``root`` (normally a typed :class:`~passhost.ir.Function`).

    One explicit-stack walk numbers the nodes in post-DFS order and, as each node is
    finished (its operands are numbered by then), records its pattern, its edges and the
    extern marks it causes. The stack holds bare nodes and two kinds of marker (no tuple
    per entry): ``_FIN`` above a node whose children are done, ``_SCOPE`` above a scope
    number. Scope switches are pushed in balanced pairs around a function's params and
    body, so the current scope when an entry is popped is the scope of the node that
    pushed it.

    :raises IRError: if an expression lacks its inferred type (run InferType first)
    :raises PassError: on a tuple access of something that is not a tuple
    """
    g = DataflowGraph()
    nodes, index = g.nodes, g.index
    pattern, extern, outputs = g.pattern, g.extern, g.outputs
    skipped = g.opaque_functions
    scopes: list = []
    seen: set = set()
    mark_seen = seen.add
    next_scope = 1
    scope = 0
    _Call, _Tuple, _TGI, _Function, _Let, _If, _Op, _Const, _Var, _TensorType, _TupleType = (
        Call, Tuple, TupleGetItem, Function, Let, If, Op, Constant, Var, TensorType, TupleType)
    FIN, SCOPE = _FIN, _SCOPE
    index_get = index.get
    op_pattern: dict = {}  # Op -> its pattern int, looked up once per operator
    stack: list = [root]
    push = stack.append
    pop = stack.pop
    add_node, add_scope, add_pattern, add_extern, add_outputs = (
        nodes.append, scopes.append, pattern.append, extern.append, outputs.append)

    def mark_extern(expr: Expr) -> None:
        j = index_get(expr)
        if j is not None:
            extern[j] = True

    while stack:
        node = pop()
        if node is SCOPE:
            scope = pop()
            continue
        if node is not FIN:
            if node in seen:
                continue
            t = type(node)
            if t is _Op:
                continue
            mark_seen(node)
            if t is _Var or t is _Const:
                # a leaf is numbered at once (no FIN round trip); it adds no edges
                index[node] = len(nodes)
                add_node(node)
                add_scope(scope)
                add_extern(False)
                add_outputs([])
                if t is _Const:
                    data = node.data
                    add_pattern(ELEMWISE if data.ndim == 0 and data.dtype.name in SIMPLE_CONST_DTYPES
                                else OPAQUE)
                else:
                    add_pattern(OPAQUE)
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
                        push(args[k])
                op = node.op
                if type(op) is not _Op:
                    push(op)
            elif t is _Tuple:
                fields = node.fields
                for k in range(len(fields) - 1, -1, -1):
                    push(fields[k])
            elif t is _TGI:
                push(node.tuple_value)
            elif t is _Function:
                if node is not root and is_barrier_function(node):
                    skipped.add(node)
                    continue
                push(scope)
                push(SCOPE)
                push(node.body)
                params = node.params
                for k in range(len(params) - 1, -1, -1):
                    push(params[k])
                push(next_scope)
                push(SCOPE)
                next_scope += 1
            elif t is _Let:
                push(node.body)
                push(node.value)
                push(node.var)
            elif t is _If:
                push(node.false_branch)
                push(node.true_branch)
                push(node.cond)
            continue

        # FIN: number the node below the marker and record what it contributes
        node = pop()
        i = len(nodes)
        index[node] = i
        add_node(node)
        add_scope(scope)
        add_extern(False)
        add_outputs([])
        t = type(node)
        if t is _Call:
            op = node.op
            if type(op) is _Op:
                pat = op_pattern.get(op)
                if pat is None:
                    pat = op_pattern[op] = OPAQUE if op.stateful else int(op.pattern)
            else:
                pat = OPAQUE
                j = index_get(op)
                if j is not None:
                    extern[j] = True
                    if scopes[j] == scope:
                        outputs[j].append((i, OPAQUE))
            add_pattern(pat)
            if pat == BROADCAST:
                # an operand of the result's own shape is an element-wise edge
                rtype = node.checked_type
                rshape = rtype.shape if type(rtype) is _TensorType else None
                for a in node.args:
                    j = index_get(a)
                    if j is None:
                        continue
                    if scopes[j] != scope:
                        extern[j] = True
                        continue
                    at = a.checked_type
                    if rshape is not None and (at is rtype or (type(at) is _TensorType and at.shape == rshape)):
                        outputs[j].append((i, ELEMWISE))
                    else:
                        outputs[j].append((i, BROADCAST))
                continue
            for a in node.args:
                j = index_get(a)
                if j is None:
                    continue
                if scopes[j] != scope:
                    extern[j] = True
                    continue
                outputs[j].append((i, pat))
        elif t is _Tuple:
            add_pattern(TUPLE)
            for f in node.fields:
                j = index_get(f)
                if j is None:
                    continue
                if scopes[j] != scope or type(f.checked_type) is not _TensorType:
                    extern[j] = True
                else:
                    outputs[j].append((i, INJECTIVE))
        elif t is _TGI:
            tv = node.tuple_value
            ttype = tv.checked_type
            if type(ttype) is not _TupleType:
                raise PassError(f"FuseOps: tuple access .{node.index} of an expression of type {ttype}, "
                                "which is not a tuple; fix the program (run InferType to check it)",
                                "FuseOps")
            j = index_get(tv)
            if j is None:
                add_pattern(OPAQUE)
            elif scopes[j] != scope or any(type(ft) is not _TensorType for ft in ttype.fields):
                extern[j] = True
                add_pattern(OPAQUE)
            else:
                add_pattern(INJECTIVE)
                outputs[j].append((i, INJECTIVE))
        else:
            add_pattern(OPAQUE)  # Var, GlobalVar, Let, If, Function: opaque
            if t is _Let:
                mark_extern(node.var)
                mark_extern(node.value)
                mark_extern(node.body)
            elif t is _If:
                mark_extern(node.cond)
                mark_extern(node.true_branch)
                mark_extern(node.false_branch)
            elif t is _Function and node not in skipped:
                for prm in node.params:
                    mark_extern(prm)
                mark_extern(node.body)
    mark_extern(root)
    return g


class PostDominatorTree:
    """Immediate post-dominators of a :class:`DataflowGraph`.

    :ivar parent: ``parent[i]`` is the index of node ``i``'s immediate post-dominator, or -1
    :ivar depth: depth in the tree (roots have depth 1)
    :ivar pattern: the combined pattern from node ``i`` to its parent
    :ivar height: the number of edges on the longest dataflow path leaving node ``i``
        (0 for a node without consumers). Every path from ``i`` to its post-dominator
        ``d`` that is longest runs through ``height[i] - height[d] - 1`` nodes strictly
        between them, a lower bound on the size of the region FuseOps would fuse.
    """

    __slots__ = ("parent", "depth", "pattern", "height", "_jump", "_jmax")

    def __init__(self, n: int) -> None:
        self.parent = [-1] * n
        self.depth = [1] * n
        self.pattern = [OPAQUE] * n
        self.height = [0] * n
        self._jump = [0] * n
        self._jmax = [-1] * n

    def _attach(self, v: int, p: int, pat: int) -> None:
        """Make ``p`` (-1: none) the parent of ``v`` and set its jump pointer."""
        parent, depth, jump, jmax = self.parent, self.depth, self._jump, self._jmax
        self.pattern[v] = pat
        if p < 0:
            parent[v] = -1
            depth[v] = 1
            jump[v] = v
            jmax[v] = -1
            return
        parent[v] = p
        depth[v] = depth[p] + 1
        jp = jump[p]
        jjp = jump[jp]
        if depth[p] - depth[jp] == depth[jp] - depth[jjp]:
            jump[v] = jjp
            m = jmax[p]
            if jmax[jp] > m:
                m = jmax[jp]
            jmax[v] = pat if pat > m else m
        else:
            jump[v] = p
            jmax[v] = pat

    def _climb(self, a: int, d: int, acc: int) -> tuple:
        """Walk ``a`` up to depth ``d``, folding every tree pattern left behind into ``acc``."""
        depth, jump, jmax, parent, pattern = self.depth, self._jump, self._jmax, self.parent, self.pattern
        while depth[a] > d:
            j = jump[a]
            if depth[j] >= d and j != a:
                if jmax[a] > acc:
                    acc = jmax[a]
                a = j
            else:
                if pattern[a] > acc:
                    acc = pattern[a]
                a = parent[a]
        return a, acc

    def lca(self, a: int, b: int, acc: int) -> tuple:
        """Least common ancestor of ``a`` and ``b`` (-1 if none) and ``acc`` combined with the
        patterns of every node climbed on the way (TVM's ``LeastCommonAncestor``)."""
        if a == b:
            return a, acc
        depth, jump, jmax, parent, pattern = self.depth, self._jump, self._jmax, self.parent, self.pattern
        if depth[a] > depth[b]:
            a, acc = self._climb(a, depth[b], acc)
        elif depth[b] > depth[a]:
            b, acc = self._climb(b, depth[a], acc)
        while a != b:
            pa = parent[a]
            if pa < 0:
                return -1, acc
            ja, jb = jump[a], jump[b]
            if ja != jb:
                m = jmax[a] if jmax[a] > jmax[b] else jmax[b]
                if m > acc:
                    acc = m
                a, b = ja, jb
            else:
                m = pattern[a] if pattern[a] > pattern[b] else pattern[b]
                if m > acc:
                    acc = m
                a, b = pa, parent[b]
        return a, acc


def post_dominator_tree(graph: DataflowGraph) -> PostDominatorTree:
    """The post-dominator tree of ``graph`` (see the module docstring)."""
    n = len(graph.nodes)
    tree = PostDominatorTree(n)
    extern, outputs = graph.extern, graph.outputs
    lca = tree.lca
    tparent, depth, tpattern, jump, jmax = tree.parent, tree.depth, tree.pattern, tree._jump, tree._jmax
    height = tree.height
    for v in range(n - 1, -1, -1):
        outs = outputs[v]
        if not outs:
            tpattern[v] = OPAQUE if extern[v] else ELEMWISE
            jump[v] = v
            continue
        if extern[v]:
            # a root: parent -1, depth 1, jump to itself (PostDominatorTree._attach inline)
            h = 0
            for consumer, _ in outs:
                if height[consumer] > h:
                    h = height[consumer]
            height[v] = h + 1
            tpattern[v] = OPAQUE
            jump[v] = v
            continue
        p, acc = outs[0]
        h = height[p]
        if len(outs) > 1:
            for k in range(1, len(outs)):
                consumer, ep = outs[k]
                if height[consumer] > h:
                    h = height[consumer]
                if p >= 0 and p != consumer:  # lca(p, p, acc) is (p, acc)
                    p, acc = lca(p, consumer, acc)
                if ep > acc:
                    acc = ep
        height[v] = h + 1
        tpattern[v] = acc
        if p < 0:
            jump[v] = v
            continue
        # PostDominatorTree._attach inline
        tparent[v] = p
        dp = depth[p]
        depth[v] = dp + 1
        jp = jump[p]
        jjp = jump[jp]
        djp = depth[jp]
        if dp - djp == djp - depth[jjp]:
            jump[v] = jjp
            m = jmax[p]
            if jmax[jp] > m:
                m = jmax[jp]
            jmax[v] = acc if acc > m else m
        else:
            jump[v] = p
            jmax[v] = acc
    return tree
