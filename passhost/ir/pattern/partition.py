"""Partitioning: every match of a pattern becomes a call of a function holding it."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional
from weakref import WeakKeyDictionary

from ..expr import Call, Expr, Function, Tuple, TupleGetItem, Var
from ..op import Op
from ..types import FuncType
from ..visitor import post_order
from .match import _inputs, _Matcher, compile_linear, root_ops
from .needs import needed_ops
from .nodes import DFPattern, VarPattern, WildcardPattern
from .prefilter import prefilter


def partition(pattern: DFPattern, expr: Expr, attrs: Optional[dict] = None,
              check: Optional[Callable[[Expr], bool]] = None, typing: Any = None) -> Expr:
    """Wrap every match of ``pattern`` in ``expr`` in a function called in its place.

    The function's parameters are the nodes the match's wildcards and variable patterns
    bound (in the order first met); constants and the matched calls move inside. Its
    attributes are ``attrs`` plus ``PartitionedFromPattern`` (the matched operators,
    as TVM spells it: ``"nn.conv2d_add_nn.relu_"``). A match is skipped when ``check``
    says no, or when one of its inner nodes is also used outside it (partitioning it
    would compute that node twice; the uses are the host's use analysis,
    :func:`passhost.ir.rewrite.use_counts`)::

        before:  nn.relu(add(nn.conv2d(%x, %w), %b))
        after:   %0 = fn (%FunctionVar_0_0, %FunctionVar_0_1, %FunctionVar_0_2,
                      Composite="conv_bias_relu", PartitionedFromPattern="nn.conv2d_add_nn.relu_") {
                   nn.relu(add(nn.conv2d(%FunctionVar_0_0, %FunctionVar_0_1), %FunctionVar_0_2))
                 };
                 %0(%x, %w, %b)

    ``typing`` is the rebuild's typing policy (:mod:`passhost.ir.rewrite`; default
    ``NO_TYPES``: what is rebuilt is left untyped): ``like_originals()`` types each call
    of a new function like the match it replaces, and keeps the types above it.
    """
    return partition_all([(pattern, attrs, check)], expr, typing)


def partition_all(entries: list, expr: Expr, typing: Any = None) -> Expr:
    """Several patterns partitioned in one walk of ``expr`` (TVM's ``MergeComposite`` over a
    pattern table): ``entries`` are ``(pattern, attrs, check)`` as :func:`partition` takes
    them; the matches are :func:`find_parts`' with one stage. For patterns whose matches
    cannot overlap this is the same as partitioning with each in turn, at the cost of one
    walk::

        partition_all([(hard_swish, {"Composite": "onnx.HardSwish"}, None),
                       (softplus, {"Composite": "onnx.Softplus"}, None)], body)
    """
    from ..rewrite import RuleTable, walk

    parts = find_parts([entries], expr)
    if not parts:
        return expr
    count = [0]
    typed = typing is not None

    def rule(post: Expr, pre: Expr) -> Optional[Expr]:
        part = parts.get(id(pre))
        return None if part is None else _extract(part, post, count, typed)

    table = RuleTable([(None, rule)], with_original=True)
    return walk(expr, table) if typing is None else walk(expr, table, typing)


class Part(NamedTuple):
    """A match :func:`find_parts` takes: its entry's ``tag``, its ``root``, its ``leaves``
    (the nodes its wildcards and variable patterns bound, in the order first met from the
    root, left to right, depth first: a partition's function parameters) and ``info``, what
    the entry's check returned for it (``True`` without a check): what the check worked out
    is not worked out again by whoever reads the part."""

    tag: Any
    root: Expr
    leaves: list
    info: Any = True


def find_parts(stages: list, expr: Expr, order: Optional[list] = None) -> dict:
    """``{id(root): Part}``: the matches a partition of ``expr`` takes, in bottom-up order,
    decided on ``expr`` as it is (nothing rebuilt). ``stages`` is a list of lists of entries
    ``(pattern, tag, check)``; each stage goes over the whole graph (``order``, its
    post-order, when the caller has it), and at each node the entries whose pattern can be
    rooted there are tried in the order given, the first match that is taken winning. A
    match is refused when ``check(root)`` says no (what it says is kept as the part's
    ``info``), when it holds a node an earlier match took, or when one of its inner nodes is
    read outside it::

        stages [[(add(multiply(x, c), c), "scale_shift", None)]]
        expr   nn.relu(add(multiply(%x, 2f), 1f))
        ->     {id(add): Part("scale_shift", add(...), [%x], True)}
    """
    from ..rewrite import use_counts

    users = use_counts(expr)
    if order is None:
        order = post_order(expr)
    at: dict = {}  # operator name -> the positions in order of its calls
    for i, node in enumerate(order):
        if type(node) is Call and type(node.op) is Op:
            at.setdefault(node.op.name, []).append(i)
    taken: set = set()
    found: dict = {}
    for entries in stages:
        by_op, anywhere = _dispatch(entries, at.keys())
        if anywhere:  # (a pattern rooted at any node: every call, tuple and item is offered)
            where: Any = (i for i, n in enumerate(order) if type(n) in (Call, Tuple, TupleGetItem))
        else:
            where = sorted(i for name in by_op for i in at.get(name, ()))
        for i in where:
            node = order[i]
            op = node.op if type(node) is Call else None
            if type(op) is Function:
                continue
            for pattern, tag, check, quick, linear in by_op.get(op.name, anywhere) if type(op) is Op else anywhere:
                if quick is not None and not quick(node):
                    continue
                took = _taken(pattern, linear, node, check, users, taken)
                if took is not None:
                    found[id(node)] = Part(tag, node, *took)
                    break
    return found


#: a pattern's prefilter, linear matcher and needed operators, built on first use (a table's patterns live as
#: long as the table)
_QUICK: WeakKeyDictionary = WeakKeyDictionary()


def _dispatch(entries: list, called: Any) -> tuple:
    """``({operator name: entries to try}, the entries for any other node)``, each entry
    with its pattern's prefilter and linear matcher, in the order given; an entry whose
    pattern needs an operator of which the graph calls none (``called``: the names it
    calls; :func:`~.needs.needed_ops`) is left out."""
    listed = []
    for pattern, tag, check in entries:
        if pattern not in _QUICK:
            _QUICK[pattern] = (prefilter(pattern), compile_linear(pattern), needed_ops(pattern))
        quick, linear, needs = _QUICK[pattern]
        if not any(called.isdisjoint(clause) for clause in needs):
            listed.append((root_ops(pattern), (pattern, tag, check, quick, linear)))
    names = {n for ops, _ in listed if ops is not None for n in ops}
    by_op = {n: [e for ops, e in listed if ops is None or n in ops] for n in names}
    return by_op, [e for ops, e in listed if ops is None]


def _taken(pattern: DFPattern, linear: Optional[Callable], root: Expr, check: Optional[Callable], users: dict,
           taken: set) -> Optional[tuple]:
    """``(leaves, info)`` of the match of ``pattern`` at ``root`` if it is taken (``taken``,
    the ids of the nodes earlier matches took, then holds its inner nodes), else ``None``;
    ``linear``: the pattern's :func:`~.match.compile_linear` matcher, if it has one."""
    if linear is not None:
        bound: Any = []
        if not linear(root, bound):
            return None
    else:
        m = _Matcher()
        if not m.match(pattern, root):
            return None
        bound = m.memo.items()
    leaves = {id(e): e for p, e in bound if type(p) in (WildcardPattern, VarPattern)}
    inner = {id(e): e for p, e in bound if id(e) not in leaves and type(e) in (Call, Tuple, TupleGetItem)}
    if inner.keys() & taken:
        return None
    for node in inner.values():
        if node is not root and _outside_uses(node, inner, users) > 0:
            return None
    info = True if check is None else check(root)
    if not info:
        return None
    taken.update(inner.keys())
    return _first_met(root, leaves), info


def _outside_uses(node: Expr, inner: dict, users: dict) -> int:
    inside = sum(1 for e in inner.values() for k in _inputs(e) if k is node)
    return users.get(node, 0) - inside


def _first_met(root: Expr, leaves: dict) -> list:
    """The nodes of ``leaves`` (``{id: node}``) under ``root`` in the order a depth-first
    walk from ``root``, left to right, first meets them (not entering a leaf)."""
    if len(leaves) < 2:
        return list(leaves.values())
    order: list = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in leaves:
            stack.extend(reversed(_inputs(node)))
        elif node not in order:  # (a match has few leaves)
            order.append(node)
    return order


def _extract(part: Part, post: Expr, count: list, typed: bool = False) -> Expr:
    """The matched graph of ``part`` as a function of its leaves, called on their rewritten
    values (``post``: the root rebuilt). With ``typed`` (a partition under a typing policy)
    the function and its body carry the types the matched nodes had, so its call is typed
    without a walk of it."""
    index = count[0]
    count[0] += 1
    rebuilt: dict = {}
    for i, node in enumerate(part.leaves):
        ty = node._checked_type
        if ty is None and type(node) is Var:
            ty = node.type_annotation
        v = Var(f"FunctionVar_{index}_{i}", ty)
        if typed and ty is not None:
            v._set_checked_type(ty)  # (what inference gives an annotated parameter)
        rebuilt[id(node)] = v
    names: list = []
    stack = [(part.root, False)]
    while stack:  # the match rebuilt from its root, on the parameters
        node, ready = stack.pop()
        if id(node) in rebuilt:
            continue
        kids = _inputs(node)
        if not ready and kids:
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids))
            continue
        if type(node) is Call:
            names.append(node.op.name if type(node.op) is Op else "call")
            new = Call(node.op, [rebuilt[id(a)] for a in node.args], node.attrs)
        elif type(node) is Tuple:
            new = Tuple([rebuilt[id(f)] for f in node.fields])
        elif type(node) is TupleGetItem:
            new = TupleGetItem(rebuilt[id(node.tuple_value)], node.index)
        else:
            rebuilt[id(node)] = node
            continue
        if typed and node._checked_type is not None:  # (the same operators on arguments of the same types)
            new._set_checked_type(node._checked_type)
        rebuilt[id(node)] = new
    fattrs = dict(part.tag or {})
    fattrs["PartitionedFromPattern"] = "".join(n + "_" for n in names)
    fn = Function([rebuilt[id(n)] for n in part.leaves], rebuilt[id(part.root)], attrs=fattrs)
    if typed:
        _typed_like_its_body(fn)
    # the leaves are called with their rewritten counterparts, found by walking post in the same shape
    post_leaf = _corresponding(part.root, post, {id(n) for n in part.leaves})
    return Call(fn, [post_leaf.get(id(n), n) for n in part.leaves])
def _typed_like_its_body(fn: Function) -> None:
    """``fn`` typed from its parameters and its body when they are (the body is the match,
    rebuilt with the types the matched nodes had), so that its call types without a walk
    of it."""
    ret = fn.body._checked_type
    if ret is None or any(p._checked_type is None for p in fn.params):
        return
    fn._set_checked_type(FuncType([p._checked_type for p in fn.params], ret))


def _corresponding(pre: Expr, post: Expr, leaf_ids: set) -> dict:
    out: dict = {}
    stack = [(pre, post)]
    seen: set = set()
    while stack:
        a, b = stack.pop()
        if id(a) in seen:
            continue
        seen.add(id(a))
        if id(a) in leaf_ids:
            out[id(a)] = b
            continue
        ka, kb = _inputs(a), _inputs(b)
        if len(ka) == len(kb):
            stack.extend(zip(ka, kb))
    return out
