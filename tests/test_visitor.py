"""Traversals: post-order walks, TVM-style visitors/mutators, the fast rewriter."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

from passhost import ir
from passhost.ir import Call, Constant, Function, If, Let, Tuple, TupleGetItem


def _chain(n: int):
    x = ir.var("x", shape=(2,))
    c = ir.const(np.ones(2, "float32"))
    e = x
    for _ in range(n):
        e = ir.add(e, c)
    return x, c, e


def test_post_order_lists_each_node_once_children_first():
    x = ir.var("x", shape=(2,))
    a = ir.exp(x)
    b = ir.add(a, a)                    # shared operand
    order = ir.post_order(b)
    assert order.count(a) == 1 and order.count(x) == 1
    assert order.index(x) < order.index(a) < order.index(b)
    assert order[-1] is b
    assert ir.Op.get("add") in order and ir.Op.get("exp") in order


def test_post_order_visits_every_kind_left_to_right():
    x = ir.var("x", shape=(2,))
    v = ir.var("v", shape=(2,))
    t = Tuple([x, ir.const(1.0)])
    g = TupleGetItem(t, 0)
    body = If(ir.const(True), g, ir.negative(v))
    f = Function([x], Let(v, ir.exp(x), body))
    seen = []
    ir.post_order_visit(f, seen.append)
    kinds = [type(n).__name__ for n in seen]
    assert kinds[-1] == "Function" and seen[0] is x
    assert seen.index(t) < seen.index(g) < seen.index(body)
    assert len(seen) == len(set(map(id, seen)))


def test_post_order_skip_does_not_enter_children():
    x = ir.var("x", shape=(2,))
    inner = ir.exp(x)
    fn = Function([x], inner)
    y = ir.var("y", shape=(2,))
    outer = Call(fn, [y])
    order = ir.post_order(outer, skip=lambda n: type(n) is Function)
    assert fn in order and inner not in order


def test_children_and_with_children_keep_identity_when_unchanged():
    x = ir.var("x", shape=(2,))
    call = ir.add(x, x)
    assert ir.children(call) == (call.op, x, x)
    assert ir.with_children(call, ir.children(call)) is call
    y = ir.var("y", shape=(2,))
    new = ir.with_children(call, (call.op, y, x))
    assert new is not call and new.args == (y, x) and new.attrs is call.attrs


def test_rewrite_post_order_rewrites_shared_nodes_once():
    x = ir.var("x", shape=(2,))
    e = ir.exp(x)
    root = ir.add(e, e)
    calls = []

    def rewrite(node):
        if type(node) is Call and node.op.name == "exp":
            calls.append(node)
            return ir.log(node.args[0])
        return None

    new = ir.rewrite_post_order(root, rewrite)
    assert len(calls) == 1
    assert new.args[0] is new.args[1] and new.args[0].op.name == "log"


def test_rewrite_post_order_returns_root_itself_when_nothing_changes():
    _, _, e = _chain(50)
    assert ir.rewrite_post_order(e, lambda n: None) is e


def test_rewrite_post_order_memo_substitutes_variables():
    x = ir.var("x", shape=(2,))
    y = ir.var("y", shape=(2,))
    e = ir.multiply(ir.exp(x), x)
    new = ir.rewrite_post_order(e, lambda n: None, memo={x: y})
    assert new.args[1] is y and new.args[0].args[0] is y


def test_keep_types_carries_the_type_to_rebuilt_parents_only():
    x = ir.var("x", shape=(2,))
    c1, c2 = ir.const(1.0), ir.const(1.0)
    root = ir.multiply(ir.add(x, c1), ir.add(x, c2))
    ir.infer_type(root)

    def merge(node):
        return c1 if node is c2 else None

    kept = ir.rewrite_post_order(root, merge, keep_types=True)
    assert kept is not root and kept.has_type and kept.checked_type == root.checked_type
    plain = ir.rewrite_post_order(root, merge)
    assert plain is not root and not plain.has_type


def test_keep_checked_type_needs_typed_children():
    x = ir.var("x", shape=(2,))
    old = ir.add(x, ir.const(1.0))
    ir.infer_type(old)
    typed_child = ir.const(2.0)
    ir.infer_type(typed_child)
    new = ir.add(x, typed_child)
    assert ir.keep_checked_type(old, new) is new and new.checked_type == old.checked_type
    untyped = ir.add(x, ir.const(3.0))
    assert ir.keep_checked_type(old, untyped) is untyped and not untyped.has_type
    # explicit kids: only those are checked (the untyped constant is not among them)
    partial = ir.add(x, ir.const(4.0))
    ir.keep_checked_type(old, partial, (x,))
    assert partial.checked_type == old.checked_type
    # an untyped ``old`` gives nothing
    fresh = ir.add(x, typed_child)
    ir.keep_checked_type(ir.add(ir.var("y", shape=(2,)), typed_child), fresh)
    assert not fresh.has_type


class CountCalls(ir.ExprVisitor):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def visit_call(self, call):
        self.calls += 1
        super().visit_call(call)


def test_expr_visitor_visits_each_node_once():
    x = ir.var("x", shape=(2,))
    a = ir.exp(x)
    v = CountCalls()
    v.visit(ir.add(a, a))
    assert v.calls == 2


class TvmStyleDoubler(ir.ExprMutator):
    """Written as TVM users write mutators: visit_call recurses through self.visit."""

    def visit_call(self, call):
        args = [self.visit(a) for a in call.args]
        return Call(call.op, args, call.attrs)

    def visit_constant(self, const):
        return Constant(const.data * 2)


def test_tvm_style_mutator_on_a_100k_chain_at_the_default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        x, c, e = _chain(100_000)
        new = TvmStyleDoubler().visit(e)
        counter = CountCalls()
        counter.visit(new)
    finally:
        sys.setrecursionlimit(old)
    assert counter.calls == 100_000
    assert float(new.args[1].data[0]) == 2.0
    # the doubled constant node is shared, like the original
    assert new.args[1] is new.args[0].args[1]


def test_mutator_returns_same_nodes_when_nothing_changes():
    _, _, e = _chain(10)
    assert ir.ExprMutator().visit(e) is e


def test_overriding_visit_function_visits_the_body_under_its_own_state():
    """State set in visit_function before self.visit(fn.body) applies to the body,
    as in TVM (e.g. FoldConstant's "inside a primitive function" flag)."""

    class Marker(ir.ExprMutator):
        def __init__(self):
            super().__init__()
            self.inside = False
            self.seen = []

        def visit_function(self, fn):
            if fn.attrs.get("Primitive"):
                self.inside = True
                body = self.visit(fn.body)
                self.inside = False
                return Function(fn.params, body, fn.ret_type, fn.attrs)
            return super().visit_function(fn)

        def visit_call(self, call):
            self.seen.append((call.op.name if isinstance(call.op, ir.Op) else "fn", self.inside))
            return super().visit_call(call)

    p = ir.var("p", shape=(2,))
    prim = Function([p], ir.exp(p), attrs={"Primitive": 1})
    x = ir.var("x", shape=(2,))
    main = Function([x], ir.negative(Call(prim, [x])))
    m = Marker()
    m.visit(main)
    assert ("exp", True) in m.seen and ("negative", False) in m.seen


def test_visit_rejects_non_expressions():
    with pytest.raises(TypeError, match="IR expression"):
        ir.ExprVisitor().visit([1, 2])


def test_whole_graph_walks_restore_the_garbage_collector():
    _, _, e = _chain(100)
    assert gc.isenabled()
    ir.post_order(e)
    ir.rewrite_post_order(e, lambda n: None)
    assert gc.isenabled()
    gc.disable()
    try:
        ir.post_order(e)
        assert not gc.isenabled()   # a user's own choice is left alone
    finally:
        gc.enable()


def test_analysis_free_and_bound_vars_and_op_counts():
    x = ir.var("x", shape=(2,))
    y = ir.var("y", shape=(2,))
    v = ir.var("v", shape=(2,))
    body = Let(v, ir.add(x, y), ir.multiply(v, x))
    assert ir.free_vars(body) == [x, y]
    assert ir.bound_vars(body) == [v]
    assert ir.count_ops(body) == {"add": 1, "multiply": 1}


def test_is_primitive_marks_fused_kernels_only():
    x = ir.var("x", shape=(2,))
    body = ir.exp(x)
    assert ir.is_primitive(Function([x], body, attrs={"Primitive": 1}))
    assert not ir.is_primitive(Function([x], body, attrs={"Primitive": 0}))
    assert not ir.is_primitive(Function([x], body))
    assert not ir.is_primitive(body)


def test_module_changed_by_identity_then_functions_then_structure():
    x = ir.var("x", shape=(2,))
    mod = ir.IRModule.from_expr(Function([x], ir.exp(x)))
    assert not ir.module_changed(mod, mod)
    assert not ir.module_changed(mod, mod.copy())  # same function objects
    y = ir.var("x", shape=(2,))
    assert not ir.module_changed(mod, ir.IRModule.from_expr(Function([y], ir.exp(y))))  # equal structure
    assert ir.module_changed(mod, ir.IRModule.from_expr(Function([y], ir.negative(y))))


def test_calls_any_sees_every_reachable_call():
    conv_op = ir.Op.get("nn.conv2d")
    targets = frozenset({conv_op})
    x = ir.var("x", shape=(1, 4, 6, 6))
    w = ir.var("w", shape=(2, 4, 3, 3))

    def conv(data, weight):
        return ir.nn.conv2d(data, weight, channels=2, kernel_size=(3, 3))

    plain = ir.nn.relu(ir.multiply(x, ir.const(2.0)))
    assert not ir.calls_any(Function([x], plain), targets)
    assert ir.calls_any(Function([x, w], Tuple([plain, ir.nn.relu(conv(x, w))])), targets)
    inner = Function([x, w], conv(x, w))  # only reachable as a callee
    assert ir.calls_any(Call(inner, [x, w]), targets)
    v = ir.var("v")
    assert ir.calls_any(Let(v, conv(x, w), TupleGetItem(Tuple([v]), 0)), targets)


def _fresh_ops(root):
    """The operators called under ``root``, by a plain post-order walk (the reference)."""
    return frozenset(n.op for n in ir.post_order(root) if type(n) is Call and type(n.op) is ir.Op)


def _random_function(seed: int, n: int = 60):
    rng = np.random.RandomState(seed)
    x = ir.var("x", shape=(2,))
    names = ["add", "subtract", "multiply", "maximum", "negative", "exp", "nn.relu", "sqrt"]
    pool = [x]
    for _ in range(n):
        name = names[rng.randint(len(names))]
        op = ir.Op.get(name)
        k = op.num_inputs
        args = [pool[rng.randint(len(pool))] for _ in range(k)]
        pool.append(Call(op, args))
    fields = pool[-3:]
    if seed % 2:  # a nested function and a let, reached only inside
        p = ir.var("p", shape=(2,))
        v = ir.var("v")
        fields.append(Call(Function([p], ir.log(p)), [Let(v, pool[-1], v)]))
    return Function([x], Tuple(fields))


def test_contains_any_finds_node_classes_everywhere_and_only_there():
    """The walk DeadCodeElimination asks first (is there a let to remove at all?)."""
    T = ir.TensorType((3,), "float32")
    x, a, p = ir.var("x", T), ir.var("a", T), ir.var("p", T)
    let = ir.Let(a, ir.negative(x), a)
    LET = frozenset({ir.Let})
    assert not ir.contains_any(ir.add(ir.negative(x), x), LET)
    assert not ir.contains_any(x, LET)
    assert ir.contains_any(let, LET)
    assert ir.contains_any(ir.add(x, ir.exp(let)), LET)  # an argument
    assert ir.contains_any(ir.TupleGetItem(ir.Tuple([x, let]), 1), LET)  # a tuple field
    assert ir.contains_any(ir.Call(ir.Function([p], ir.Let(a, p, a)), [x]), LET)  # a local callee's body
    assert ir.contains_any(ir.Function([p], ir.add(p, let)), LET)  # a nested function
    cond = ir.less(ir.sum(x), ir.const(0.0))
    assert ir.contains_any(ir.If(cond, x, let), LET) and not ir.contains_any(ir.If(cond, x, ir.negative(x)), LET)
    assert ir.contains_any(ir.If(cond, x, x), frozenset({ir.If, ir.Let}))
    assert ir.contains_any(ir.add(x, x), frozenset({ir.Var})) and not ir.contains_any(ir.add(x, x), frozenset({ir.If}))
    with pytest.raises(ir.IRError, match="calls_any"):
        ir.contains_any(x, frozenset({ir.Op}))
    assert ir.contains_any(ir.add(x, x), frozenset({ir.Call}))


def test_calls_any_cache_answers_like_a_fresh_walk():
    all_ops = [ir.Op.get(o) for o in ("add", "subtract", "multiply", "maximum", "negative", "exp",
                                      "nn.relu", "sqrt", "log", "nn.conv2d")]
    for seed in range(12):
        fn = _random_function(seed)
        used = _fresh_ops(fn)
        rng = np.random.RandomState(100 + seed)
        for _ in range(10):  # asked repeatedly, in any order, for any operators
            ops = frozenset(all_ops[i] for i in rng.choice(len(all_ops), rng.randint(1, 4), replace=False))
            assert ir.calls_any(fn, ops) == bool(used & ops)
        assert ir.analysis.called_ops(fn) == used
        assert ir.calls_any(fn.body, frozenset(used)) == bool(used)  # non-functions: walked


def test_calls_any_asks_once_per_function_and_keeps_no_function_alive(monkeypatch):
    from passhost.ir import analysis, facts

    walks = []
    orig = analysis._walk_ops

    def counting(root, stop):
        walks.append(root)
        return orig(root, stop)

    monkeypatch.setattr(analysis, "_walk_ops", counting)
    conv = frozenset({ir.Op.get("nn.conv2d")})
    ir.nn.conv2d(ir.var("d", shape=(1, 1, 3, 3)), ir.var("k", shape=(1, 1, 1, 1)))  # "ever called"
    fn = _random_function(3)
    assert not ir.calls_any(fn, conv)
    assert not ir.calls_any(fn, conv)              # the second question needs no walk
    assert ir.calls_any(fn, frozenset({ir.Op.get("log")}))
    assert walks == [fn]
    other = Function(fn.params, fn.body)           # a new function object: its own entry
    assert not ir.calls_any(other, conv) and walks == [fn, other]
    relu = ir.nn.relu(fn.params[0])
    hit = Function(fn.params, relu)
    assert ir.calls_any(hit, frozenset({relu.op}))  # stopped early: nothing remembered
    assert not ir.calls_any(hit, conv)              # so this question walks again, fully
    assert len(walks) == 4
    refs = [weakref.ref(f) for f in (fn, other, hit)]
    assert all(f in facts.CALLED_OPS for f in (fn, other, hit))
    size = len(facts.CALLED_OPS)
    walks.clear()
    del fn, other, hit
    gc.collect()
    assert all(r() is None for r in refs)             # the cache kept none of them alive
    assert len(facts.CALLED_OPS) <= size - 3      # and their entries went with them


def test_calls_any_walks_a_100k_deep_chain():
    x, _, e = _chain(100_000)
    fn = Function([x], e)
    assert ir.analysis.called_ops(fn) == frozenset({ir.Op.get("add")})
    assert not ir.calls_any(fn, frozenset({ir.Op.get("nn.relu")}))


def _reference_post_order(root, skip=None, visited=()):
    """Recursive post-order (small graphs only): the specification post_order must meet."""
    done = set(visited)
    out = []

    def rec(n):
        if n in done:
            return
        if not (skip is not None and skip(n)):
            for c in ir.children(n):
                rec(c)
        done.add(n)
        out.append(n)

    rec(root)
    return out


def _random_graph(seed: int, n: int = 80):
    """A random DAG over every node kind, with shared sub-expressions."""
    rng = np.random.RandomState(seed)
    x, y = ir.var("x", shape=(2,)), ir.var("y", shape=(2,))
    c = ir.const(np.ones(2, "float32"))
    pool = [x, y, c]

    def pick():
        return pool[len(pool) - 1 - min(len(pool) - 1, int(rng.exponential(6)))]

    for i in range(n):
        k = rng.randint(9)
        if k < 3:
            e = ir.add(pick(), pick())
        elif k == 3:
            e = ir.negative(pick())
        elif k == 4:
            e = TupleGetItem(Tuple([pick(), pick(), pick()]), rng.randint(3))
        elif k == 5:
            v = ir.var(f"v{i}")
            e = Let(v, pick(), ir.add(v, pick()))
        elif k == 6:
            e = If(ir.const(True), pick(), pick())
        elif k == 7:
            p = ir.var(f"p{i}", shape=(2,))
            e = Call(Function([p], ir.multiply(p, pick())), [pick()])
        else:
            e = ir.subtract(pick(), pick())
        pool.append(e)
    return Function([x, y], Tuple(pool[-4:]))


def test_post_order_matches_the_recursive_definition():
    for seed in range(30):
        fn = _random_graph(seed)
        assert ir.post_order(fn) == _reference_post_order(fn)
        nodes = ir.post_order(fn)
        calls = [n for n in nodes if type(n) is Call]
        skip = set(calls[::3]).__contains__  # skip: listed, children not entered
        assert ir.post_order(fn, skip=skip) == _reference_post_order(fn, skip=skip)
        walked = set(nodes[: len(nodes) // 2])  # visited: neither listed nor entered
        visited = set(walked)
        got = ir.post_order(fn, visited=visited)
        assert got == _reference_post_order(fn, visited=walked)
        assert visited == walked | set(got)


def test_calls_any_needs_no_walk_for_an_operator_never_called(monkeypatch):
    from passhost.ir import analysis

    walks = []
    orig = analysis._walk_ops
    monkeypatch.setattr(analysis, "_walk_ops", lambda root, stop: walks.append(root) or orig(root, stop))
    rel = ir.Op.get("nn.relu").type_rel
    fresh = ir.register_op(ir.OpDef("tv.never_called", 1, rel), override=True)
    fn = _random_function(5)
    body = fn.body
    assert not ir.calls_any(fn, frozenset({fresh}))
    assert not ir.calls_any(body, frozenset({fresh}))
    assert walks == []                         # answered without looking at the graph
    x = fn.params[0]
    uses = Function([x], Call(fresh, [ir.negative(x)]))  # the first call ever built of it
    assert ir.calls_any(uses, frozenset({fresh}))
    assert not ir.calls_any(body, frozenset({fresh}))   # now asked by walking
    assert walks == [uses, body]
    again = ir.register_op(ir.OpDef("tv.never_called", 1, rel), override=True)
    assert again is not fresh and not ir.calls_any(uses, frozenset({again}))  # a new Op object


# --- rewrite_post_order(with_original=..., type_like=..., order=...) ----------------------


def _typed_graph():
    x = ir.var("x", shape=(2,))
    e = ir.exp(x)
    root = ir.add(e, ir.negative(e))   # e is shared
    ir.infer_type(root)
    return x, e, root


def test_with_original_hands_the_rule_the_rebuilt_node_and_the_original():
    x, e, root = _typed_graph()
    seen = []

    def rule(new, old):
        seen.append((new, old))
        if type(old) is Call and old.op.name == "exp":
            assert new is old and old.has_type          # children unchanged: the node itself
            return ir.log(new.args[0])
        return None

    out = ir.rewrite_post_order(root, rule, with_original=True)
    olds = [o for _, o in seen]
    assert olds == ir.post_order(root)                  # every node once, leaves too, post-order
    new_root, old_root = seen[-1]
    assert old_root is root and old_root.args[0] is e  # the original, with original children
    assert new_root is out and out.args[0].op.name == "log"
    assert out.args[1].args[0] is out.args[0]          # sharing kept
    assert not out.has_type and not out.args[1].has_type  # no typing asked


def test_with_original_still_honours_memo_and_skip():
    x = ir.var("x", shape=(2,))
    y = ir.var("y", shape=(2,))
    fn = Function([x], ir.exp(x))
    root = ir.add(ir.negative(x), Call(fn, [x]))
    pairs = []
    out = ir.rewrite_post_order(root, lambda n, o: pairs.append((n, o)), memo={x: y},
                                skip=lambda n: type(n) is Function, with_original=True)
    assert out.args[0].args[0] is y and out.args[1].args == (y,)
    assert out.args[1].op is fn                         # skipped: kept, body not entered
    assert all(o is not x for _, o in pairs)            # memo-seeded nodes are not visited
    assert (fn, fn) in pairs


def test_type_like_types_rebuilt_nodes_like_the_originals():
    x, e, root = _typed_graph()
    z = ir.var("z", shape=(2,))
    ir.infer_type(z)
    typed_in_rule = []

    def rule(new, old):
        if type(old) is Call:
            typed_in_rule.append(new.has_type)
        return None

    out = ir.rewrite_post_order(root, rule, memo={x: z}, with_original=True, type_like=True)
    assert out is not root and out.args[0].args[0] is z
    for new, old in zip(ir.post_order(out), ir.post_order(root)):
        if type(old) is not ir.Op and old is not x:
            assert new.checked_type is old.checked_type   # rebuilt: the original's type object
    assert all(typed_in_rule)                       # rebuilt calls are typed before the rule runs


def test_type_like_infers_a_new_sub_expression_on_its_own():
    x, e, root = _typed_graph()
    x_type = x.checked_type

    def rule(new, old):
        if type(old) is Call and old.op.name == "exp":
            return ir.multiply(ir.exp(new.args[0]), ir.const(1.0))   # untyped nodes over typed x
        return None

    out = ir.rewrite_post_order(root, rule, with_original=True, type_like=True)
    rep = out.args[0]
    assert rep.op.name == "multiply" and rep.checked_type == e.checked_type
    assert rep.args[0].has_type and rep.args[1].checked_type == ir.TensorType((), "float32")
    assert x.checked_type is x_type                 # typed nodes are not visited again
    assert out.checked_type is root.checked_type    # parents rebuilt over it: the original's type


def test_type_like_gives_no_type_for_an_untyped_original_and_keeps_a_replacement_type():
    x = ir.var("x", shape=(2,))
    root = ir.negative(ir.exp(x))                   # never type-inferred
    out = ir.rewrite_post_order(
        root, lambda n, o: ir.log(n.args[0]) if type(o) is Call and o.op.name == "exp" else None,
        with_original=True, type_like=True)
    assert out.args[0].op.name == "log"
    assert not out.has_type and not out.args[0].has_type   # nothing to be like: left alone

    x2, e2, root2 = _typed_graph()
    other = ir.const(np.ones((3,), "float32"))
    ir.infer_type(other)
    out2 = ir.rewrite_post_order(root2, lambda n, o: other if o is e2 else None,
                                 with_original=True, type_like=True)
    assert out2.args[0] is other and other.checked_type == ir.TensorType((3,), "float32")
    # the parents' new children are typed, so they take their originals' types as documented
    assert out2.args[1].checked_type is root2.args[1].checked_type


def test_type_like_covers_tuples_and_functions():
    x = ir.var("x", shape=(2,))
    fn = Function([x], Tuple([ir.exp(x), TupleGetItem(Tuple([x, x]), 0)]))
    ir.infer_type(fn)

    def rule(new, old):
        if type(old) is Call and old.op.name == "exp":
            return ir.sqrt(new.args[0])
        return None

    out = ir.rewrite_post_order(fn, rule, with_original=True, type_like=True)
    assert type(out) is Function and out.body.fields[0].op.name == "sqrt"
    assert out.body.checked_type is fn.body.checked_type and out.checked_type is fn.checked_type
    assert out.body.fields[1] is fn.body.fields[1]  # unchanged sub-graph kept


def test_keep_types_still_needs_a_typed_callee():
    # keep_types keeps keep_checked_type's rule: a non-operator callee must be typed too
    p = ir.var("p", shape=(2,))
    f = ir.var("f")                                 # a closure variable, never typed
    x = ir.var("x", shape=(2,))
    old = Call(f, [ir.exp(x)])
    old._set_checked_type(ir.TensorType((2,), "float32"))
    old.args[0]._set_checked_type(ir.TensorType((2,), "float32"))
    new_arg = ir.exp(p)
    ir.infer_type(new_arg)
    out = ir.rewrite_post_order(old, lambda n: new_arg if n is old.args[0] else None, keep_types=True)
    assert out.args == (new_arg,) and not out.has_type


def test_order_is_walked_as_given():
    x, e, root = _typed_graph()
    order = ir.post_order(root)
    visited = []
    out = ir.rewrite_post_order(root, lambda n, o: visited.append(o), with_original=True, order=order)
    assert out is root and visited == order
    # a partial order (the caller's choice) is what gets walked
    visited.clear()
    ir.rewrite_post_order(root, lambda n, o: visited.append(o), with_original=True, order=order[:2])
    assert visited == order[:2]


def test_with_original_and_type_like_on_a_100k_chain_at_the_default_recursion_limit():
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        x, c, e = _chain(100_000)
        ir.infer_type(e)
        middle = e
        for _ in range(50_000):
            middle = middle.args[0]
        count = [0]

        def rule(new, old):
            count[0] += 1
            if old is middle:                       # a new, untyped sub-expression mid-chain
                return ir.multiply(new, ir.const(np.ones(2, "float32")))
            return None

        out = ir.rewrite_post_order(e, rule, with_original=True, type_like=True)
    finally:
        sys.setrecursionlimit(old_limit)
    assert count[0] == 100_000 + 3                  # every call, x, c and the add operator
    assert out is not e and out.checked_type is e.checked_type
    node, depth = out, 0
    while type(node) is Call and node.op.name == "add":
        assert node.has_type
        node, depth = node.args[0], depth + 1
    assert depth == 50_000 and node.op.name == "multiply" and node.checked_type == middle.checked_type
    assert node.args[0] is middle                   # below the replacement: kept as it was


def test_memo_gets_an_entry_for_every_changed_node_only():
    x = ir.var("x", shape=(2,))
    y = ir.var("y", shape=(2,))
    e = ir.exp(x)
    keep = ir.negative(y)
    root = ir.add(e, keep)
    memo = {x: y}
    out = ir.rewrite_post_order(root, lambda n: None, memo=memo)
    assert memo == {x: y, e: out.args[0], root: out}
    assert out.args[1] is keep


def test_rewrite_post_order_offers_only_the_nodes_asked_for():
    """``only``: the rule driver's index -- a node no rule can be rooted at is not offered."""
    x = ir.var("x", shape=(2,))
    pair = ir.Tuple([ir.exp(x), x])
    body = ir.add(ir.TupleGetItem(pair, 0), ir.negative(x))
    seen = []

    def rule(node):
        seen.append(type(node).__name__ if type(node) is not ir.Call else node.op.name)
        return ir.exp(node.args[0]) if type(node) is ir.Call and node.op.name == "negative" else None

    out = ir.rewrite_post_order(body, rule, only=frozenset({ir.Op.get("negative"), ir.TupleGetItem}))
    assert sorted(seen) == ["TupleGetItem", "negative"]
    assert out.args[1].op.name == "exp" and out.args[0] is body.args[0]
    seen.clear()
    ir.rewrite_post_order(body, rule)
    assert len(seen) == 9  # without it: every node (x, exp, the tuple, .0, negative, add, three operators)


def test_rewrite_post_order_bind_substitutes_let_variables_in_their_bodies():
    from passhost import ir

    x = ir.var("x", shape=(2,), dtype="float32")
    a, b = ir.var("a"), ir.var("b")
    value = ir.add(x, x)
    # let %a = add(%x, %x); let %b = %a; multiply(%b, %a)
    expr = ir.Let(a, value, ir.Let(b, a, ir.multiply(b, a)))
    bound = []

    def bind(var, new_value):
        bound.append((var.name_hint, new_value))
        return new_value  # inline every binding

    def drop(let):
        return let.body

    out = ir.rewrite_post_order(expr, drop, only=frozenset({ir.Let}), bind=bind)
    assert ir.structural_equal(out, ir.multiply(value, value))
    assert out.args[0] is out.args[1] is value  # %b resolved through %a: one shared node
    assert [name for name, _ in bound] == ["a", "b"]
    assert bound[1][1] is value  # bound to %a's substitution, not to %a


def test_rewrite_post_order_bind_drops_bound_lets_and_keeps_the_others_binding_sites():
    from passhost import ir

    x = ir.var("x", shape=(2,), dtype="float32")
    a, b = ir.var("a"), ir.var("b")
    expr = ir.Let(a, ir.nn.relu(x), ir.Let(b, ir.negative(a), ir.add(a, b)))
    out = ir.rewrite_post_order(expr, lambda e: None,
                                bind=lambda var, value: value if var is b else None)
    # %b inlined and its let gone; %a's let kept, still binding %a itself
    assert type(out) is ir.Let and out.var is a
    assert ir.structural_equal(out.body, ir.add(a, ir.negative(a)))


def test_rewrite_post_order_renames_binding_sites_through_the_memo():
    from passhost import ir

    x, a = ir.var("x", shape=(2,), dtype="float32"), ir.var("a")
    fn = ir.Function([x], ir.Let(a, ir.nn.relu(x), ir.add(a, x)))
    x2, a2 = ir.var("x2", shape=(2,), dtype="float32"), ir.var("a2")
    out = ir.rewrite_post_order(fn, lambda e: None, memo={x: x2, a: a2})
    assert out.params == (x2,) and out.body.var is a2  # a fresh copy, as numerics.evaluable makes
    assert ir.well_formed(ir.IRModule.from_expr(out))
    assert ir.free_vars(out) == []


def test_rewrite_none_only_substitutes():
    """``rewrite=None``: no rule is offered anything; the memo's substitutions and
    ``bind`` still apply, and a walk with neither hands the root back."""
    x, y = ir.var("x", shape=(2,)), ir.var("y", shape=(2,))
    keep = ir.negative(y)
    root = ir.add(ir.exp(x), keep)
    assert ir.rewrite_post_order(root, None) is root
    out = ir.rewrite_post_order(root, None, memo={x: y})
    assert out.args[0].args[0] is y and out.args[1] is keep
    a = ir.var("a", shape=(2,))
    let = ir.Let(a, ir.exp(x), ir.multiply(a, a))
    bound = ir.rewrite_post_order(let, None, bind=lambda var, value: value)
    assert type(bound) is ir.Call and bound.args[0] is bound.args[1] is let.value
