"""The analyses FuseOps partitions: an indexed dataflow graph and its post-dominator tree.

Both follow TVM's ``IndexedForwardGraph`` and ``DominatorTree`` (``fuse_ops.cc`` and
``analysis/graph_partitioner.cc``), built without recursion so a 100,000-deep chain
works at Python's default recursion limit.

**Dataflow graph.** The host's use analysis (:func:`passhost.ir.rewrite.dataflow`) lists
every expression reachable from the root, except operators, in post-DFS order (children
before parents, left to right -- the order of :func:`passhost.ir.post_order`), with the
users of each. On top of it a node records its *pattern* (an
:class:`~passhost.ir.OpPattern` value), whether it is *extern* (used from outside the
fusible dataflow: function parameters and bodies, operands of ``let``/``if``, non-tensor
tuple fields ...) and its *consumers*: the users it has a fusible edge to, each edge with
a pattern (:meth:`DataflowGraph.edge_pattern`; ``outputs`` lists the pairs as TVM does).

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

from typing import Optional

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
)
from passhost.ir.rewrite import dataflow

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


#: what a consumer is to each of its producers (``DataflowGraph.epat``): an edge pattern
#: (>= 0), or one of these
BCAST_EDGE = -1    # a broadcasting call: ELEMWISE from an operand of the result's shape, else BROADCAST
NO_EDGE = -2       # a let, an if, a function: its parts are used outside the fusible dataflow
TUPLE_EDGE = -3    # a tuple: INJECTIVE from a tensor field; a field of another type is extern
CALLEE_EDGE = -4   # a call of an expression: OPAQUE; the callee itself is also extern


class DataflowGraph:
    """The indexed forward dataflow graph of one function, over the host's use analysis.

    :ivar nodes: expressions in post-DFS order (operators excluded):
        :func:`passhost.ir.rewrite.dataflow`'s order, ``Primitive`` functions not entered
    :ivar index: ``{expr: position in nodes}``
    :ivar pattern: node pattern kinds (ints, :class:`~passhost.ir.OpPattern` values)
    :ivar extern: ``extern[i]`` is true when node ``i`` is used outside the dataflow
    :ivar consumers: ``consumers[i]`` lists the nodes node ``i`` flows into, one per use
        (the host analysis' users, less the uses that are no fusible edge)
    :ivar epat: ``epat[c]``: the pattern of the edges into consumer ``c``, or how to find it
        (:data:`BCAST_EDGE`, :data:`TUPLE_EDGE`, :data:`CALLEE_EDGE`); see :meth:`edge_pattern`
    :ivar rtype: ``rtype[c]``: the result type of a broadcasting call ``c`` (else None)
    :ivar opaque_functions: nested functions that were not entered (primitive/external)
    """

    __slots__ = ("nodes", "index", "pattern", "extern", "consumers", "epat", "rtype", "opaque_functions")

    def __init__(self, nodes: list, index: dict) -> None:
        n = len(nodes)
        self.nodes = nodes
        self.index = index
        self.pattern: list = [OPAQUE] * n
        self.extern: list = [False] * n
        self.consumers: list = [None] * n
        self.epat: list = [OPAQUE] * n
        self.rtype: list = [None] * n
        self.opaque_functions: set = set()

    def __len__(self) -> int:
        return len(self.nodes)

    def edge_pattern(self, v: int, c: int) -> int:
        """The pattern of the edge from node ``v`` into its consumer ``c``."""
        ep = self.epat[c]
        if ep >= 0:
            return ep
        if ep == BCAST_EDGE:
            rt = self.rtype[c]
            at = self.nodes[v].checked_type
            same = type(rt) is TensorType and (at is rt or (type(at) is TensorType and at.shape == rt.shape))
            return ELEMWISE if same else BROADCAST
        return INJECTIVE if ep == TUPLE_EDGE else OPAQUE

    @property
    def outputs(self) -> list:
        """``outputs[i]``: ``(consumer, edge pattern)`` pairs of node ``i`` (TVM's form)."""
        return [[(c, self.edge_pattern(v, c)) for c in cs] for v, cs in enumerate(self.consumers)]

    def dump(self) -> str:
        """A debugging listing: ``index: kind pattern [extern] -> consumers``."""
        lines = []
        for i, (node, outs) in enumerate(zip(self.nodes, self.outputs)):
            flag = " extern" if self.extern[i] else ""
            lines.append(f"{i}: {type(node).__name__} pattern={self.pattern[i]}{flag} -> "
                         f"[{', '.join(f'{c}:{p}' for c, p in outs)}]")
        return "\n".join(lines)


def build_graph(root: Expr) -> DataflowGraph:
    """Build the dataflow graph of ``root`` (normally a typed :class:`~passhost.ir.Function`).

    The nodes, their order and their users are the host's use analysis
    (:func:`passhost.ir.rewrite.dataflow`, which does not enter ``Primitive`` functions);
    one loop over them in reverse post-DFS order (consumers before producers) records
    each node's pattern and what it is to its producers, and keeps of each node's users
    the ones that are fusible edges, marking the node extern for the others.

    :raises IRError: if an expression lacks its inferred type (run InferType first)
    :raises PassError: on a tuple access of something that is not a tuple
    """
    df = dataflow(root, skip=is_barrier_function)
    g = DataflowGraph(df.nodes, df.index)
    scoped = any(f is not root for f in df.functions)
    _label(g, df.users, df.owners() if scoped else None, df.functions)
    g.extern[df.index[root]] = True
    return g


# hot loop: one step per node and per use of the function FuseOps fuses (every -O3 run); a
# helper call per node would cost as much as the work, so each kind of node is handled in line
def _label(g: DataflowGraph, users: list, owners: Optional[list], entered: dict) -> None:
    nodes, index = g.nodes, g.index
    pattern, extern, consumers, epat, rtype = g.pattern, g.extern, g.consumers, g.epat, g.rtype
    opaque = g.opaque_functions
    _Call, _Tuple, _TGI, _Function, _Let, _If, _Op, _Const, _TensorType, _TupleType = (
        Call, Tuple, TupleGetItem, Function, Let, If, Op, Constant, TensorType, TupleType)
    op_pattern: dict = {}  # Op -> its pattern int, looked up once per operator
    for v in range(len(nodes) - 1, -1, -1):
        node = nodes[v]
        t = type(node)
        # what node v is to its producers (they come later in this loop)
        if t is _Call:
            op = node.op
            if type(op) is _Op:
                pat = op_pattern.get(op)
                if pat is None:
                    pat = op_pattern[op] = OPAQUE if op.stateful else int(op.pattern)
                pattern[v] = pat
                if pat == BROADCAST:
                    epat[v] = BCAST_EDGE
                    rtype[v] = node.checked_type
                else:
                    epat[v] = pat
            else:
                epat[v] = CALLEE_EDGE
        elif t is _Const:
            data = node.data
            if data.ndim == 0 and data.dtype.name in SIMPLE_CONST_DTYPES:
                pattern[v] = ELEMWISE
        elif t is _Tuple:
            pattern[v] = TUPLE
            epat[v] = TUPLE_EDGE
        elif t is _TGI:
            ttype = node.tuple_value.checked_type
            if type(ttype) is not _TupleType:
                raise PassError(f"FuseOps: tuple access .{node.index} of an expression of type {ttype}, "
                                "which is not a tuple; fix the program (run InferType to check it)",
                                "FuseOps")
            j = index[node.tuple_value]
            if (owners is not None and owners[j] != owners[v]) or any(
                    type(ft) is not _TensorType for ft in ttype.fields):
                epat[v] = NO_EDGE
            else:
                pattern[v] = INJECTIVE
                epat[v] = INJECTIVE
        elif t is _Let:
            epat[v] = NO_EDGE
            extern[index[node.var]] = True
        elif t is _If:
            epat[v] = NO_EDGE
        elif t is _Function:
            if node in entered:
                epat[v] = NO_EDGE
                for prm in node.params:
                    extern[index[prm]] = True
            else:
                opaque.add(node)
        # which of its users node v flows into (each was labelled above, at its own step)
        us = users[v]
        keep = us
        for k in range(len(us)):
            c = us[k]
            ep = epat[c]
            if ep == NO_EDGE:
                ok = False
            elif ep == TUPLE_EDGE:
                ok = type(node.checked_type) is _TensorType
            elif ep == CALLEE_EDGE:
                ok = True
                if nodes[c].op is node:
                    extern[v] = True
            else:
                ok = True
            if ok and owners is not None and owners[c] != owners[v]:
                ok = False
            if not ok:
                extern[v] = True
                if keep is us:
                    keep = us[:k]
            elif keep is not us:
                keep.append(c)
        consumers[v] = keep


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


# hot loop: one step per node and per edge of the graph (every -O3 run of FuseOps); the
# tree attachment and the edge patterns are in line for the same reason
def post_dominator_tree(graph: DataflowGraph) -> PostDominatorTree:
    """The post-dominator tree of ``graph`` (see the module docstring)."""
    n = len(graph.nodes)
    tree = PostDominatorTree(n)
    extern, consumers = graph.extern, graph.consumers
    nodes, epat, rtype = graph.nodes, graph.epat, graph.rtype
    lca = tree.lca
    tparent, depth, tpattern, jump, jmax = tree.parent, tree.depth, tree.pattern, tree._jump, tree._jmax
    height = tree.height
    _TensorType = TensorType
    for v in range(n - 1, -1, -1):
        outs = consumers[v]
        if not outs:
            tpattern[v] = OPAQUE if extern[v] else ELEMWISE
            jump[v] = v
            continue
        if extern[v]:
            # a root: parent -1, depth 1, jump to itself (PostDominatorTree._attach inline)
            h = 0
            for consumer in outs:
                if height[consumer] > h:
                    h = height[consumer]
            height[v] = h + 1
            tpattern[v] = OPAQUE
            jump[v] = v
            continue
        at = None  # node v's type, read at its first broadcasting consumer
        p = -1
        acc = h = 0
        for k in range(len(outs)):
            consumer = outs[k]
            ep = epat[consumer]
            if ep < 0:  # DataflowGraph.edge_pattern in line
                if ep == BCAST_EDGE:
                    rt = rtype[consumer]
                    if at is None:
                        at = nodes[v].checked_type
                    ep = ELEMWISE if type(rt) is _TensorType and (
                        at is rt or (type(at) is _TensorType and at.shape == rt.shape)) else BROADCAST
                else:
                    ep = INJECTIVE if ep == TUPLE_EDGE else OPAQUE
            if k == 0:
                p, acc, h = consumer, ep, height[consumer]
                continue
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
