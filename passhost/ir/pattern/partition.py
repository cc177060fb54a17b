"""Partitioning: every match of a pattern becomes a call of a function holding it."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..expr import Call, Expr, Function, Tuple, TupleGetItem, Var
from ..op import Op
from ..types import FuncType
from .match import _inputs, _Matcher, root_ops
from .nodes import DFPattern, VarPattern, WildcardPattern


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
    them. At each node, bottom-up, the patterns that can be rooted at it are tried in the
    order given and the first match that is taken wins; a match taking a node an earlier
    match took is refused. For patterns whose matches cannot overlap this is the same as
    partitioning with each in turn, at the cost of one walk::

        partition_all([(hard_swish, {"Composite": "onnx.HardSwish"}, None),
                       (softplus, {"Composite": "onnx.Softplus"}, None)], body)
    """
    from ..rewrite import RuleTable, use_counts, walk

    users = use_counts(expr)
    taken: set = set()
    count = [0]
    table = RuleTable(with_original=True)
    for pattern, attrs, check in entries:
        ops = root_ops(pattern)
        table.add(None if ops is None else [Op.get(n) for n in ops],
                  _rule(pattern, attrs, check, users, taken, count, typing is not None))
    return walk(expr, table) if typing is None else walk(expr, table, typing)


def _rule(pattern: DFPattern, attrs: Optional[dict], check: Optional[Callable[[Expr], bool]], users: dict,
          taken: set, count: list, typed: bool) -> Callable:
    """The walk's rule partitioning the matches of one pattern (``taken``: the ids of the
    nodes earlier matches took, shared by every pattern of the walk; ``typed``: the
    functions made are typed like the matches, see :func:`_extract`)."""

    def rule(post: Expr, pre: Expr) -> Optional[Expr]:
        if type(post) is Function or (type(pre) is Call and type(pre.op) is Function):
            return None
        m = _Matcher()
        if not m.match(pattern, pre):
            return None
        leaves = {id(e) for p, e in m.memo.items() if type(p) in (WildcardPattern, VarPattern)}
        inner = {id(e): e for p, e in m.memo.items()
                 if id(e) not in leaves and type(e) in (Call, Tuple, TupleGetItem)}
        if inner.keys() & taken:
            return None
        for node in inner.values():
            if node is not pre and _outside_uses(node, inner, users) > 0:
                return None
        if check is not None and not check(pre):
            return None
        taken.update(inner.keys())
        return _extract(pre, post, m.memo, leaves, attrs, count, typed)

    return rule


def _outside_uses(node: Expr, inner: dict, users: dict) -> int:
    inside = sum(1 for e in inner.values() for k in _inputs(e) if k is node)
    return users.get(node, 0) - inside


def _extract(pre: Expr, post: Expr, memo: dict, leaves: set, attrs: Optional[dict], count: list,
             typed: bool = False) -> Expr:
    """The matched graph of ``pre`` as a function of its leaves, called on their rewritten
    values. With ``typed`` (a partition under a typing policy) the function and its body
    carry the types the matched nodes had, so its call is typed without a walk of it."""
    index = count[0]
    count[0] += 1
    params: dict = {}
    order: list = []
    leaf_nodes = {id(e): e for p, e in memo.items() if id(e) in leaves}
    names: list = []
    # walk the match from the root, leaves first met become parameters
    rebuilt: dict = {}
    stack = [(pre, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in rebuilt:
            continue
        if id(node) in leaf_nodes:
            ty = node._checked_type
            if ty is None and type(node) is Var:
                ty = node.type_annotation
            v = Var(f"FunctionVar_{index}_{len(order)}", ty)
            if typed and ty is not None:
                v._set_checked_type(ty)  # (what inference gives an annotated parameter)
            params[id(node)] = v
            order.append(node)
            rebuilt[id(node)] = v
            continue
        kids = _inputs(node)
        if not ready and kids:
            stack.append((node, True))
            for k in reversed(kids):
                stack.append((k, False))
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
    # The matched tree was rebuilt from pre; its leaves are called with their rewritten
    # counterparts, found by walking post in the same shape.
    post_leaf = _corresponding(pre, post, set(leaf_nodes))
    fattrs = dict(attrs or {})
    fattrs["PartitionedFromPattern"] = "".join(n + "_" for n in names)
    fn = Function([params[id(n)] for n in order], rebuilt[id(pre)], attrs=fattrs)
    if typed:
        _typed_like_its_body(fn)
    return Call(fn, [post_leaf.get(id(n), n) for n in order])


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
