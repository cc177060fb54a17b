"""The driver's prefilter: a cheap necessary condition, never a reason to miss a match."""
from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from passhost import ir
from passhost.ir.pattern import DFPatternCallback, is_constant, is_op, is_tuple_get_item, is_var, rewrite, wildcard
from passhost.ir.pattern.match import _Matcher, compile_simple
from passhost.ir.pattern.needs import needed_ops
from passhost.ir.pattern.prefilter import prefilter


def _x(shape=(1, 4)):
    return ir.var("x", shape=shape, dtype="float32")


def _c(v=1.0, shape=(4,)):
    return ir.const(np.full(shape, v, dtype="float32"))


def _layer_norm_pattern():
    x, g, b = wildcard(), is_constant(), is_constant()
    centered = is_op("subtract")(x, is_op("mean")(x))
    shifted = is_op("add")(is_op("mean")(is_op("power")(centered, is_constant())), is_constant())
    norm = is_op("divide")(centered, is_op("sqrt")(shifted)) | is_op("multiply")(centered, is_op("rsqrt")(shifted))
    scaled = is_op("multiply")(norm, g)
    return is_op("add")(scaled, b) | scaled


def test_a_batch_norm_shift_is_rejected_below_the_root_without_matching():
    # add(multiply(conv, c), c): roots the layer-norm rule can have, a convolution where it wants divide
    data = ir.var("d", shape=(1, 4, 8, 8), dtype="float32")
    w = ir.const(np.ones((4, 4, 1, 1), dtype="float32"))
    scale = ir.const(np.ones((4, 1, 1), dtype="float32"))
    bn = ir.add(ir.multiply(ir.nn.conv2d(data, w), scale), scale)
    check = prefilter(_layer_norm_pattern())
    assert check is not None and not check(bn)
    assert not _Matcher().match(_layer_norm_pattern(), bn)


def test_a_real_layer_norm_passes_the_prefilter_in_either_argument_order():
    x = _x()
    m = ir.mean(x, axis=[-1], keepdims=True)
    d = ir.subtract(x, m)
    v = ir.mean(ir.power(d, ir.const(np.float32(2))), axis=[-1], keepdims=True)
    n = ir.divide(d, ir.sqrt(ir.add(ir.const(np.float32(1e-5)), v)))  # epsilon first: commutative
    ln = ir.add(_c(0.5), ir.multiply(_c(2.0), n))
    pattern = _layer_norm_pattern()
    assert _Matcher().match(pattern, ln)
    assert prefilter(pattern)(ln)


def test_patterns_that_constrain_nothing_have_no_prefilter():
    assert prefilter(wildcard()) is None
    assert prefilter(wildcard() | is_op("add")(wildcard(), wildcard())) is None


def test_alternative_operator_heads_with_bare_wildcards_bind_without_the_backtracking_matcher():
    x, c = wildcard(), wildcard()
    pattern = (is_op("multiply") | is_op("add"))(x, c)
    flat = compile_simple(pattern)
    assert flat is not None
    e = ir.add(_x(), _c())
    got = flat(e)
    m = _Matcher()
    assert m.match(pattern, e)
    assert got[x] is m.memo[x] and got[c] is m.memo[c]
    assert flat(ir.subtract(_x(), _c())) is None


def test_rewrite_with_the_prefilter_still_fires_on_the_swapped_spelling():
    class MulOne(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.x = wildcard()
            self.pattern = is_op("multiply")(is_op("nn.relu")(self.x), is_constant())

        def callback(self, pre, post, node_map):
            return ir.nn.relu(node_map[self.x][0])

    x = _x()
    out = rewrite(MulOne(), ir.multiply(_c(), ir.nn.relu(x)))
    assert ir.structural_equal(out, ir.nn.relu(x))


# -- property: whenever the matcher matches, the prefilter accepts ------------------------

_LEAVES = ["x", "y", "c1", "c2"]
_BINARY = ["add", "multiply", "subtract", "divide"]
_UNARY = ["nn.relu", "sqrt", "negative"]


def _exprs():
    leaf = st.sampled_from(_LEAVES).map(lambda n: ("leaf", n))
    return st.recursive(leaf, lambda kids: st.one_of(
        st.tuples(st.just("u"), st.sampled_from(_UNARY), kids),
        st.tuples(st.just("b"), st.sampled_from(_BINARY), kids, kids)), max_leaves=8)


def _patterns():
    leaf = st.sampled_from(["w", "const", "var", "w_shared"]).map(lambda n: ("leaf", n))
    return st.recursive(leaf, lambda kids: st.one_of(
        st.tuples(st.just("u"), st.sampled_from(_UNARY), kids),
        st.tuples(st.just("b"), st.sampled_from(_BINARY), kids, kids),
        st.tuples(st.just("alt"), kids, kids),
        st.tuples(st.just("heads"), st.lists(st.sampled_from(_BINARY), min_size=1, max_size=3), kids, kids)),
        max_leaves=8)


def _build_expr(t):
    env = {"x": _x(), "y": ir.var("y", shape=(1, 4), dtype="float32"), "c1": _c(1.0), "c2": _c(2.0)}
    stack = [(t, False)]
    out = []
    while stack:
        node, done = stack.pop()
        if node[0] == "leaf":
            out.append(env[node[1]])
            continue
        kids = node[2:]
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids))
            continue
        args = [out.pop() for _ in kids][::-1]
        out.append(ir.Call(ir.Op.get(node[1]), args))
    return out[0]


def _build_pattern(t, shared):
    kind = t[0]
    if kind == "leaf":
        return {"w": wildcard(), "const": is_constant(), "var": is_var(), "w_shared": shared}[t[1]]
    if kind == "u":
        return is_op(t[1])(_build_pattern(t[2], shared))
    if kind == "b":
        return is_op(t[1])(_build_pattern(t[2], shared), _build_pattern(t[3], shared))
    if kind == "alt":
        return _build_pattern(t[1], shared) | _build_pattern(t[2], shared)
    head = is_op(t[1][0])
    for name in t[1][1:]:
        head = head | is_op(name)
    return head(_build_pattern(t[2], shared), _build_pattern(t[3], shared))


@settings(max_examples=400, deadline=None)
@given(_patterns(), _exprs())
def test_the_prefilter_never_rejects_a_node_the_pattern_matches(ptree, etree):
    pattern = _build_pattern(ptree, wildcard())
    expr = _build_expr(etree)
    check = prefilter(pattern)
    if _Matcher().match(pattern, expr):
        assert check is None or check(expr)
    flat = compile_simple(pattern)
    if flat is not None:
        assert (flat(expr) is not None) == _Matcher().match(pattern, expr)


@settings(max_examples=400, deadline=None)
@given(_patterns(), _exprs())
def test_a_matched_node_calls_an_operator_of_every_needed_clause(ptree, etree):
    pattern = _build_pattern(ptree, wildcard())
    expr = _build_expr(etree)
    if _Matcher().match(pattern, expr):
        called = {n.name for n in ir.post_order(expr) if isinstance(n, ir.Op)}
        for clause in needed_ops(pattern):
            assert clause & called, (pattern, clause, called)


# -- the clauses, and the driver skipping a function none of its rules can match ----------


def test_needed_ops_are_one_clause_per_operator_and_one_per_alternative_of_operators():
    x, w, b = wildcard(), wildcard(), wildcard()
    dense_bias = is_op("add")(is_op("nn.dense")(x, w) | is_op("nn.matmul")(x, w), b)
    assert needed_ops(dense_bias) == (frozenset({"add"}), frozenset({"nn.dense", "nn.matmul"}))
    # either side of an alternative: only what both imply (``add`` or ``multiply``)
    assert needed_ops(is_op("add")(x, b) | is_op("multiply")(is_op("add")(x, b), w)) == \
        (frozenset({"add"}),)
    # the top-level ``multiply`` implies the alternatives ``divide | multiply`` and ``sqrt | multiply``
    assert set(needed_ops(_layer_norm_pattern())) == {
        frozenset({"add"}), frozenset({"mean"}), frozenset({"multiply"}), frozenset({"power"}),
        frozenset({"subtract"}), frozenset({"divide", "rsqrt"}), frozenset({"sqrt", "rsqrt"})}
    assert needed_ops(wildcard()) == () and needed_ops(is_constant() | is_op("add")(x, b)) == ()


def test_needed_ops_remembered_by_structure_tell_operators_and_shapes_apart():
    # rule passes rebuild their patterns every run: the clauses are remembered by structure,
    # which must still tell apart patterns differing in an operator, an argument or a nesting
    def make(inner, arity=2):
        return is_op("add")(is_op(inner)(*[wildcard() for _ in range(arity)]), wildcard())

    assert needed_ops(make("nn.dense")) == (frozenset({"add"}), frozenset({"nn.dense"}))
    assert needed_ops(make("nn.dense")) == (frozenset({"add"}), frozenset({"nn.dense"}))  # a new object
    assert needed_ops(make("nn.matmul")) == (frozenset({"add"}), frozenset({"nn.matmul"}))
    assert needed_ops(is_op("add")(wildcard(), wildcard())) == (frozenset({"add"}),)
    assert needed_ops(is_op("add")(wildcard(), wildcard()).has_attr({"k": 1})) == (frozenset({"add"}),)
    assert needed_ops(is_op("add")(wildcard(), wildcard()) | is_op("nn.dense")(wildcard(), wildcard())) == \
        (frozenset({"add", "nn.dense"}),)
    assert needed_ops(is_tuple_get_item(is_op("split")(wildcard()), 0)) == (frozenset({"split"}),)


class _DenseBias(DFPatternCallback):
    def __init__(self):
        super().__init__(name="dense_bias")
        self.x, self.w, self.b = wildcard(), wildcard(), wildcard()
        self.pattern = is_op("add")(is_op("nn.dense")(self.x, self.w), self.b)

    def callback(self, pre, post, node_map):
        return ir.nn.bias_add(post.args[0], node_map[self.b][0], axis=-1)


def _sweeps(monkeypatch):
    import importlib

    # each sweep is one walk of the engine (the module: ``pattern.rewrite`` is also the function)
    pattern_driver = importlib.import_module("passhost.ir.pattern.rewrite")

    calls = []

    real = pattern_driver.walk

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(pattern_driver, "walk", counting)
    return calls


def test_a_function_without_an_operator_a_rule_needs_is_returned_without_a_sweep(monkeypatch):
    sweeps = _sweeps(monkeypatch)
    x = ir.var("x", shape=(2, 4), dtype="float32")
    w = ir.const(np.ones((4, 4), dtype="float32"))
    # ``add`` (the rule's root) is there, ``nn.dense`` is not: no match is possible
    fn = ir.Function([x], ir.add(ir.nn.relu(ir.add(x, _c(1.0))), _c(2.0)))
    stats: dict = {}
    assert rewrite(_DenseBias(), fn, stats=stats) is fn
    assert sweeps == [] and stats["dense_bias"]["tried"] == 0
    # with a dense deep inside, the same rule sweeps and fires
    dense = ir.Function([x], ir.nn.relu(ir.add(ir.nn.dense(ir.nn.relu(x), w), _c(1.0))))
    out = rewrite(_DenseBias(), dense)
    assert len(sweeps) == 1 and out is not dense
    assert "nn.bias_add" in ir.count_ops(out)


def test_the_operators_a_function_calls_are_listed_once_for_every_later_rule_set(monkeypatch):
    driver = sys.modules["passhost.ir.pattern.rewrite"]  # (the package's ``rewrite`` is the function)
    walks = []
    real = driver.post_order

    def counting(root, *args, **kwargs):
        walks.append(root)
        return real(root, *args, **kwargs)

    monkeypatch.setattr(driver, "post_order", counting)
    x = ir.var("x", shape=(2, 4), dtype="float32")
    fn = ir.Function([x], ir.multiply(ir.nn.relu(x), _c(3.0)))
    for _ in range(3):  # three passes of fusions the function cannot hold
        assert rewrite(_DenseBias(), fn) is fn
    assert walks == [fn]  # the first listed its operators; the others asked the memo


def test_if_and_let_patterns_need_what_each_of_their_parts_needs():
    from passhost.ir.pattern import is_if, is_let

    x = wildcard()
    cond = is_op("less")(x, x)
    assert set(needed_ops(is_if(cond, is_op("exp")(x), x))) == {frozenset({"less"}), frozenset({"exp"})}
    assert needed_ops(is_let(wildcard(), is_op("sqrt")(x), x)) == (frozenset({"sqrt"}),)
