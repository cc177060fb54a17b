"""Grouping the dataflow graph into fusible groups (TVM's ``GraphPartitioner``).

Groups form a union-find forest indexed like the graph's nodes: group ``i`` starts as
node ``i`` alone, with the node's pattern, the node as its *root* (the group's output)
and, for ``OUT_ELEMWISE_FUSABLE`` nodes (conv2d, dense, pooling ...), the node as its
*anchor*. A merge adds node counts and, when the child group holds an anchor, moves the
anchor to the parent and raises the parent's pattern to the child's (two groups that are
both more complex than broadcast never merge).

With fusion enabled (``opt_level >= 1``) three phases walk the nodes in post-DFS order
and try to fuse each node into the group of its immediate post-dominator ``d``:

* phase 0 fuses ``OUT_ELEMWISE_FUSABLE`` nodes with following element-wise chains
  (the post-dominator is reached element-wise and every node on the way, ``d``
  included, is at most broadcast), and element-wise/broadcast nodes into their consumer
  (reached injectively or through a reduction; intermediate nodes at most injective, the
  sink anything up to an ``OUT_ELEMWISE_FUSABLE`` anchor group) -- this rule applies in
  every phase;
* phase 1 adds injective nodes and tuples when every node up to ``d`` is at most injective;
* phase 2 pulls injective producers into tuples that were fused into a later injective op.

A fusion is refused when ``d``'s group plus the groups on the paths up to ``d`` would
exceed ``max_depth`` nodes, when ``d`` already holds the node, or when ``d`` is a tuple.

TVM walks the region between a node and ``d`` three times (count its nodes, check its
patterns, merge it) and walks all of it even when the count is far over the limit. Here
one walk does all three and stops at the first node over the limit or failing the
pattern check; before it, the longest path from the node to ``d`` (from the
post-dominator tree's ``height``) rejects most far-away post-dominators without walking,
since every node on that path counts at least one. The decisions are exactly TVM's (the
tests cross-check a literal transcription). Every walk uses an explicit stack.
"""
from __future__ import annotations

from typing import Optional

from passhost.errors import PassError
from passhost.ir import OpPattern

from .graph import DataflowGraph, PostDominatorTree, post_dominator_tree

__all__ = ["Partition", "partition"]

ELEMWISE = int(OpPattern.ELEMWISE)
BROADCAST = int(OpPattern.BROADCAST)
INJECTIVE = int(OpPattern.INJECTIVE)
COMM_REDUCE = int(OpPattern.COMM_REDUCE)
OUT_ELEMWISE_FUSABLE = int(OpPattern.OUT_ELEMWISE_FUSABLE)
TUPLE = int(OpPattern.TUPLE)
OPAQUE = int(OpPattern.OPAQUE)


def _le_injective(kind: int, is_sink: bool) -> bool:
    return kind <= INJECTIVE


def _le_broadcast(kind: int, is_sink: bool) -> bool:
    return kind <= BROADCAST


def _elemwise_target(kind: int, is_sink: bool) -> bool:
    # Intermediate nodes on parallel branches may be injective; the sink may already
    # hold an OUT_ELEMWISE_FUSABLE anchor (or be a reduction).
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= OUT_ELEMWISE_FUSABLE


class Partition:
    """The union-find groups of one graph.

    :ivar parent: union-find parent of each group (-1 for a group root)
    :ivar pattern: pattern of each group record
    :ivar root: the node index that is the output of each group record
    :ivar anchor: whether each group record holds an ``OUT_ELEMWISE_FUSABLE`` anchor
    :ivar num_nodes: node count of each group record (exact for group roots)
    """

    __slots__ = ("graph", "parent", "pattern", "root", "anchor", "num_nodes")

    def __init__(self, graph: DataflowGraph) -> None:
        n = len(graph.nodes)
        self.graph = graph
        self.parent = [-1] * n
        self.pattern = list(graph.pattern)
        self.root = list(range(n))
        self.anchor = [p == OUT_ELEMWISE_FUSABLE for p in graph.pattern]
        self.num_nodes = [1] * n

    def find(self, g: int) -> int:
        """The root group of ``g`` (with path compression)."""
        parent = self.parent
        r = g
        while parent[r] >= 0:
            r = parent[r]
        while g != r:
            nxt = parent[g]
            parent[g] = r
            g = nxt
        return r

    def groups(self) -> list:
        """``groups()[i]`` is the root group of node ``i``."""
        find = self.find
        parent = self.parent
        out = []
        append = out.append
        for i, p in enumerate(parent):  # find inline for roots and their direct members
            if p < 0:
                append(i)
            elif parent[p] < 0:
                append(p)
            else:
                append(find(i))
        return out

    def _merge(self, child: int, parent: int) -> None:
        gparent = self.parent
        if gparent[child] >= 0:
            child = self.find(child)
        if gparent[parent] >= 0:
            parent = self.find(parent)
        if child == parent:
            return
        num = self.num_nodes
        num[parent] += num[child]
        gparent[child] = parent
        if self.anchor[child]:
            if self.anchor[parent]:
                raise PassError("FuseOps: internal error: two groups with an out-elementwise-fusable "
                                "anchor were merged; please report this with the input program",
                                "FuseOps")
            self.anchor[parent] = True
            cp, pp = self.pattern[child], self.pattern[parent]
            if cp > BROADCAST and pp > BROADCAST:
                raise PassError("FuseOps: internal error: cannot merge two complex groups together; "
                                "please report this with the input program", "FuseOps")
            self.pattern[parent] = cp if cp > pp else pp

    # -- the phases -------------------------------------------------------------------
    def run_phase(self, tree: PostDominatorTree, phase: int, max_depth: int) -> None:
        """One pass of the fusion algorithm over all nodes (see the module docstring).

        The checks are TVM's; they are side-effect free, so the cheap ones run first and
        the size limit and path check (one walk, :meth:`_fusible_region`) come last.
        """
        pattern = self.pattern
        gparent = self.parent
        find = self.find
        dparent, dpattern = tree.parent, tree.pattern
        merge, num, outputs = self._merge, self.num_nodes, self.graph.consumers
        height = tree.height
        try_region = self._fusible_region
        for nid in range(len(pattern)):
            gpat = pattern[nid]
            if gpat == OPAQUE:
                continue
            d = dparent[nid]
            if d < 0:
                continue
            if phase == 2:
                if gpat > INJECTIVE:
                    continue
                rd = gparent[d]
                if rd < 0:
                    rd = d
                elif gparent[rd] >= 0:
                    rd = find(d)
                if pattern[rd] == TUPLE:
                    continue
                if pattern[d] != TUPLE or pattern[rd] > INJECTIVE:
                    continue
                cond = _le_injective
            else:
                if pattern[d] == TUPLE:
                    continue
                if gpat == OUT_ELEMWISE_FUSABLE:
                    if phase != 0 or dpattern[nid] != ELEMWISE:
                        continue
                    cond = _le_broadcast
                elif gpat <= BROADCAST:
                    dp = dpattern[nid]
                    if dp > INJECTIVE and dp != COMM_REDUCE:
                        continue
                    cond = _elemwise_target
                elif gpat == INJECTIVE or gpat == TUPLE:
                    if phase != 1:
                        continue
                    cond = _le_injective
                else:  # COMM_REDUCE never fuses into its consumer
                    continue
                # find(nid) == find(d), with the one-step cases inline (most nodes)
                rn = gparent[nid]
                if rn < 0:
                    rn = nid
                elif gparent[rn] >= 0:
                    rn = find(nid)
                rd = gparent[d]
                if rd < 0:
                    rd = d
                elif gparent[rd] >= 0:
                    rd = find(d)
                if rn == rd:
                    continue
            # rd: d's group, found once above (no merge since)
            outs = outputs[nid]
            total = num[rd] + num[nid]
            if len(outs) == 1 and outs[0] == d:
                # the common case, a direct edge: nothing lies between nid and d
                if total <= max_depth and cond(pattern[rd], True):
                    merge(nid, d)
                continue
            # Every node on a longest path from nid to d counts at least 1: reject without
            # walking when that alone is over the limit (most far-away post-dominators).
            if total + height[nid] - height[d] - 1 > max_depth:
                continue
            if cond(pattern[rd], True):
                region = try_region(nid, d, total, cond, max_depth)
                if region is not None:
                    merge(nid, d)
                    for v in region:
                        merge(v, d)

    def _fusible_region(self, src: int, sink: int, total: int, cond, max_depth: int) -> Optional[list]:
        """The nodes strictly between ``src`` and ``sink`` when fusing them all into
        ``sink``'s group is allowed, else ``None``: one walk doing the work of
        :meth:`count_fused_nodes` (``total`` starts at the sink group's and ``src``'s node
        counts) and :meth:`check_path` (the sink itself was checked by the caller), and
        listing what :meth:`commit_fuse` would merge."""
        outputs = self.graph.consumers
        num = self.num_nodes
        pattern = self.pattern
        gparent = self.parent
        find = self.find
        visited = {src, sink}
        region: list = []
        stack = []
        pop, push, seen, keep = stack.pop, stack.append, visited.add, region.append
        for c in outputs[src]:
            if c not in visited:
                seen(c)
                push(c)
        while stack:
            v = pop()
            total += num[v]
            if total > max_depth:
                return None
            r = gparent[v]
            if r < 0:
                r = v
            elif gparent[r] >= 0:
                r = find(v)
            if not cond(pattern[r], False):
                return None
            keep(v)
            for c in outputs[v]:
                if c not in visited:
                    seen(c)
                    push(c)
        return region


def partition(graph: DataflowGraph, opt_level: int, max_depth: int = 256) -> Partition:
    """Group ``graph``'s nodes for fusion.

    :param opt_level: 0 keeps every node in its own group; any higher level runs the
        three fusion phases
    :param max_depth: the most nodes one group may hold (``relay.FuseOps.max_depth``)
    """
    part = Partition(graph)
    if opt_level == 0:
        return part
    tree = post_dominator_tree(graph)
    for phase in range(3):
        part.run_phase(tree, phase, max_depth)
    return part
